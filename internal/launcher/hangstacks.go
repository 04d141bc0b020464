package launcher

import (
	"strings"
)

// frame is one line of a Python stack as faulthandler writes it:
// `  File "train.py", line 42 in all_reduce`.
type frame struct {
	File string
	Line string
	Func string
}

func (f frame) String() string {
	return f.Func + " (" + f.File + ":" + f.Line + ")"
}

// innermostFrame returns the innermost frame of the main thread in a
// faulthandler all-threads dump (the section whose header names the main
// thread's id, as the process's sitecustomize recorded it; without that id,
// the first "Current thread" section, which is the thread that took the
// signal: the main thread for SIGUSR2). faulthandler lists a thread's
// frames innermost first ("most recent call first"). ok is false when the
// dump has no such section or the section has no frames.
func innermostFrame(dump, mainThread string) (f frame, ok bool) {
	mainThread = strings.ToLower(strings.TrimSpace(mainThread))
	var inMain bool
	for _, line := range strings.Split(dump, "\n") {
		t := strings.TrimRight(line, "\r")
		if strings.HasPrefix(t, "Thread 0x") || strings.HasPrefix(t, "Current thread 0x") {
			if inMain {
				return frame{}, false // the main thread's section had no frames
			}
			id := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(t, "Current thread "), "Thread "))
			if mainThread != "" {
				inMain = len(id) > 0 && strings.ToLower(id[0]) == mainThread
			} else {
				inMain = strings.HasPrefix(t, "Current thread ")
			}
			continue
		}
		if !inMain {
			continue
		}
		if f, ok := parseFrame(t); ok {
			return f, true
		}
	}
	return frame{}, false
}

// parseFrame reads `  File "X", line N in F`.
func parseFrame(line string) (frame, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), `File "`)
	if !ok {
		return frame{}, false
	}
	i := strings.LastIndex(rest, `", line `)
	if i < 0 {
		return frame{}, false
	}
	file, rest := rest[:i], rest[i+len(`", line `):]
	num, fn, ok := strings.Cut(rest, " in ")
	if !ok || num == "" || fn == "" {
		return frame{}, false
	}
	if j := strings.LastIndexByte(file, '/'); j >= 0 {
		file = file[j+1:]
	}
	return frame{File: file, Line: num, Func: strings.TrimSpace(fn)}, true
}
