package tracking

import (
	"fmt"

	"github.com/sextant/sextant/internal/errs"
)

// The rules every tracking store keeps, and the errors that say a rule
// was broken, in MLflow's words (the client and its users match on some of
// them). A store reads the state a rule needs inside the transaction that
// writes, asks the function here, and stores what it is given; it words
// no error of the domain itself, so that every backend answers alike.

// RunUsage counts what a run holds against its per-run limits, or what
// one write adds to it.
type RunUsage struct {
	Params, Tags, MetricKeys, MetricSteps int64
}

// CheckRun decides whether a write adding adding to a run that holds have
// stays within the per-run limits. The error names the first limit the
// write breaches, in the order params, tags, metric keys, metric steps.
func (l Limits) CheckRun(have, adding RunUsage) error {
	checks := []struct {
		limit     string
		have, add int64
		max       int64
		hint      string
	}{
		{"params per run", have.Params, adding.Params, int64(l.ParamsPerRun), ""},
		{"tags per run", have.Tags, adding.Tags, int64(l.TagsPerRun), ""},
		{"metric keys per run", have.MetricKeys, adding.MetricKeys, int64(l.MetricKeysPerRun), ""},
		{"metric steps per run", have.MetricSteps, adding.MetricSteps, l.MetricStepsPerRun, StepsHint},
	}
	for _, c := range checks {
		// A limit of 0 is unset (WithDefaults fills it in); unset is never
		// "unlimited", but a store opened without limits checks none.
		if c.add > 0 && c.max > 0 && c.have+c.add > c.max {
			return LimitError(c.limit, c.have, c.add, c.max, c.hint)
		}
	}
	return nil
}

// CheckParam is the rule that a param, once logged, keeps its value: it
// returns nil when value is the value stored for key (a client retry), and
// the error MLflow gives otherwise.
func CheckParam(runID, key, stored, value string) error {
	if stored == value {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Changing param values is not allowed. Param with key='%s' was already logged with value='%s' for run ID='%s'. Attempted logging new value '%s'.", key, errs.Truncate(stored, 200), runID, errs.Truncate(value, 200))
}

// CheckModelParam is CheckParam for the params of a logged model.
func CheckModelParam(modelID, key, stored, value string) error {
	if stored == value {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Changing param values is not allowed. Param with key='%s' was already logged with value='%s' for logged model '%s'.", key, errs.Truncate(stored, 200), modelID)
}

// CheckExperimentActive is the rule that only an active experiment takes
// new runs, tags and logged models.
func CheckExperimentActive(id string, stage LifecycleStage) error {
	if stage == Active {
		return nil
	}
	return errs.Errorf(errs.Invalid, "The experiment %s must be in the 'active' state. Current state is %s.", id, stage)
}

// CheckExperimentRename is the rule that only an active experiment is
// renamed.
func CheckExperimentRename(id string, stage LifecycleStage) error {
	if stage == Active {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Cannot rename a non-active experiment. Experiment %s is %s.", id, stage)
}

// CheckExperimentLifecycle is the rule that deleting deletes an active
// experiment and restoring restores a deleted one.
func CheckExperimentLifecycle(id string, from, to LifecycleStage) error {
	switch {
	case to == Active && from == Active:
		return errs.Errorf(errs.Invalid, "Cannot restore an active experiment. Experiment %s is active.", id)
	case to == Deleted && from == Deleted:
		return errs.Errorf(errs.Invalid, "Experiment %s is already deleted.", id)
	}
	return nil
}

// CheckRunActive is the rule that only an active run is written to.
func CheckRunActive(id string, stage LifecycleStage) error {
	if stage == Active {
		return nil
	}
	return errs.Errorf(errs.Invalid, "The run %s must be in the 'active' state. Current state is %s.", id, stage)
}

// ExperimentNotFound is the error for an experiment id that names none.
func ExperimentNotFound(id string) error {
	return errs.Errorf(errs.NotFound, "No Experiment with id=%s exists", id)
}

// ExperimentNameNotFound is the error for an experiment name that names
// none.
func ExperimentNameNotFound(name string) error {
	return errs.Errorf(errs.NotFound, "Could not find experiment with name '%s'", name)
}

// ExperimentExists is the error for a new experiment whose name is taken,
// by an active or (deleted) a deleted experiment.
func ExperimentExists(name string, deleted bool) error {
	if deleted {
		return errs.Errorf(errs.AlreadyExists, "Experiment '%s' already exists in deleted state. You can restore the experiment, or permanently delete the experiment to create a new one.", name)
	}
	return errs.Errorf(errs.AlreadyExists, "Experiment '%s' already exists.", name)
}

// ExperimentIDExists is the error for an imported experiment whose id is
// taken.
func ExperimentIDExists(id string) error {
	return errs.Errorf(errs.AlreadyExists, "Experiment with id %s already exists.", id)
}

// ExperimentTagNotFound is the error for deleting a tag an experiment
// does not have.
func ExperimentTagNotFound(id, key string) error {
	return errs.Errorf(errs.NotFound, "No tag with name: %s in experiment with id %s", key, id)
}

// RunNotFound is the error for a run id that names none.
func RunNotFound(id string) error {
	return errs.Errorf(errs.NotFound, "Run with id=%s not found", id)
}

// RunTagNotFound is the error for deleting a tag a run does not have.
func RunTagNotFound(runID, key string) error {
	return errs.Errorf(errs.NotFound, "No tag with name: %s in run with id %s", key, runID)
}

// LoggedModelNotFound is the error for a logged model id that names none.
func LoggedModelNotFound(id string) error {
	return errs.Errorf(errs.NotFound, "Logged model with ID '%s' not found.", id)
}

// LoggedModelTagNotFound is the error for deleting a tag a logged model
// does not have.
func LoggedModelTagNotFound(id, key string) error {
	return errs.Errorf(errs.NotFound, "No tag with key '%s' found for logged model '%s'.", key, id)
}

// RegisteredModelNotFound is the error for a registered model name that
// names none.
func RegisteredModelNotFound(name string) error {
	return errs.Errorf(errs.NotFound, "Registered Model with name=%s not found", name)
}

// ModelVersionNotFound is the error for a version a registered model does
// not have.
func ModelVersionNotFound(name, version string) error {
	return errs.Errorf(errs.NotFound, "Model Version (name=%s, version=%s) not found", name, version)
}

// ModelAliasNotFound is the error for an alias a registered model does not
// have.
func ModelAliasNotFound(alias string) error {
	return errs.Errorf(errs.NotFound, "Registered model alias %s not found.", alias)
}

// RegisteredModelTagNotFound is the error for deleting a tag a registered
// model does not have.
func RegisteredModelTagNotFound(name, key string) error {
	return errs.Errorf(errs.NotFound, "No tag with key '%s' on registered model '%s'", key, name)
}

// ModelVersionTagNotFound is the error for deleting a tag a model version
// does not have.
func ModelVersionTagNotFound(name, version, key string) error {
	return errs.Errorf(errs.NotFound, "No tag with key '%s' on model version %s/%s", key, name, version)
}

// BadPageToken is the error for a page token that is not the
// next_page_token of a previous page of the same query (of route, when
// named).
func BadPageToken(token, route string) error {
	of := ""
	if route != "" {
		of = " for " + route
	}
	return &errs.Error{Code: errs.Invalid, Msg: fmt.Sprintf("invalid page_token %q%s: pass back the next_page_token of the previous page unchanged", errs.Truncate(token, 40), of)}
}

// PageTokenOfOtherSearch is the error for a page token made by a search
// whose query differed from this one in what changed names, as in "filter
// or order_by".
func PageTokenOfOtherSearch(changed string) error {
	return errs.Errorf(errs.Invalid, "page_token belongs to a different search (%s changed)", changed)
}
