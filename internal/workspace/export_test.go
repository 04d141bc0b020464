package workspace

// SetCompare replaces s's bcrypt comparison, so that a test can hold
// password checks in flight.
func SetCompare(s *Service, f func(hash, password []byte) error) { s.compare = f }
