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
	if plainWords(line) {
		return nil
	}
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

// plainWords reports whether line is a simple command that bash always
// parses: words of letters, digits, _ . / , : = + @ % - and quoted
// strings ('…' holding anything but NUL, "…" without $ ` \ !) between
// blanks, no unquoted word one of bash's reserved words. Most task lines
// are ("python train.py --lr=0.1 --name 'run 3'"); telling so takes
// nanoseconds where the parser takes a microsecond, which a million-line
// task file would wait for before its first run.
func plainWords(line string) bool {
	start, quoted := 0, false
	for i := 0; i <= len(line); i++ {
		if i < len(line) && !isBlank(line[i]) {
			switch c := line[i]; {
			case c == '\'':
				end := strings.IndexByte(line[i+1:], '\'')
				if end < 0 || strings.IndexByte(line[i+1:i+1+end], 0) >= 0 {
					return false
				}
				i, quoted = i+1+end, true
			case c == '"':
				end := strings.IndexByte(line[i+1:], '"')
				if end < 0 || strings.ContainsAny(line[i+1:i+1+end], "$`\\!\x00") {
					return false
				}
				i, quoted = i+1+end, true
			case !isPlainByte(c):
				return false
			}
			continue
		}
		if i > start && !quoted && reservedWords[line[start:i]] {
			return false
		}
		start, quoted = i+1, false
	}
	return true
}

func isBlank(b byte) bool { return b == ' ' || b == '\t' }

func isPlainByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	switch b {
	case '_', '.', '/', ',', ':', '=', '+', '@', '%', '-':
		return true
	}
	return false
}

// reservedWords are bash's words that are syntax where a command starts.
// Only letters among them matter to plainWords: the others ({ } ! [[ ]])
// hold a byte it already refuses.
var reservedWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true,
	"case": true, "esac": true, "for": true, "select": true, "while": true,
	"until": true, "do": true, "done": true, "in": true, "function": true,
	"time": true, "coproc": true,
}
