package tracking

import (
	"crypto/rand"
	"fmt"
	"math/big"
)

// Word lists for generated run names, in the shape MLflow users know
// ("<adjective>-<noun>-<number>"). Our own lists: short, neutral words.
var (
	nameAdjectives = []string{
		"amber", "bold", "brisk", "calm", "clever", "crisp", "dapper", "eager",
		"fair", "gentle", "glad", "grand", "honest", "humble", "jolly", "keen",
		"kind", "lively", "lucid", "merry", "mellow", "nimble", "noble", "plucky",
		"polite", "proud", "quick", "quiet", "rapid", "regal", "sharp", "shy",
		"silent", "sleek", "smooth", "snappy", "steady", "sunny", "swift", "tidy",
		"upbeat", "vast", "vivid", "warm", "wise", "witty", "young", "zesty",
	}
	nameNouns = []string{
		"ant", "badger", "bear", "bee", "bison", "crane", "crow", "deer",
		"dove", "eagle", "eel", "elk", "falcon", "ferret", "finch", "fox",
		"gecko", "goat", "hare", "hawk", "heron", "ibis", "jay", "koala",
		"lark", "lemur", "lynx", "mole", "moose", "newt", "otter", "owl",
		"panda", "puffin", "quail", "raven", "robin", "seal", "shrew", "sloth",
		"swan", "tapir", "toad", "trout", "vole", "wasp", "wolf", "yak",
	}
)

// GenerateRunName returns a random run name such as "brisk-otter-417".
func GenerateRunName() string {
	return fmt.Sprintf("%s-%s-%d", pick(nameAdjectives), pick(nameNouns), randInt(1000))
}

func pick(words []string) string { return words[randInt(len(words))] }

func randInt(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0
	}
	return int(v.Int64())
}
