package sweep

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellChecker tells whether bash can parse a task line, so a line with an
// unclosed quote or a stray "fi" is an input error before anything starts
// rather than a failed run. A Go parser of bash (mvdan.cc/sh, the parser
// of shfmt) reads every line, at about a microsecond a line; a line it
// rejects is handed to bash -n itself, so that nodepack never refuses a
// line bash accepts, and the message is bash's own.
type shellChecker struct {
	parser *syntax.Parser
}

func newShellChecker() *shellChecker {
	return &shellChecker{parser: syntax.NewParser(syntax.Variant(syntax.LangBash))}
}

// check returns bash's complaint about line, or nil.
func (c *shellChecker) check(line string) error {
	if _, err := c.parser.Parse(strings.NewReader(line), ""); err == nil {
		return nil
	}
	cmd := exec.Command("bash", "-n", "-c", line)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		return nil
	} else if _, ok := err.(*exec.ExitError); !ok {
		return nil // no bash to ask: the runs will say so
	}
	msg := strings.TrimSpace(stderr.String())
	if i := strings.LastIndex(msg, "\n"); i >= 0 && strings.Contains(msg[i:], "syntax error: unexpected end of file") {
		msg = msg[:i] // bash adds this line after the real reason
	}
	msg = strings.ReplaceAll(msg, "\n", "; ")
	msg = strings.TrimPrefix(msg, "bash: -c: ")
	msg = strings.TrimPrefix(msg, "line 1: ")
	if msg == "" {
		msg = "syntax error"
	}
	return errors.New("bash cannot parse this line: " + msg)
}
