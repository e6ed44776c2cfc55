package run

import "strings"

// Plain returns the words of a task line that is one plain command: words
// of letters, digits and _ . / = : , + @ % ^ - only, separated by blanks,
// its first neither an assignment nor a bash keyword or builtin. Such a
// line means the same started directly as through bash -c, which execs a
// lone command itself (the same program, arguments, exit and signals); a
// line with any other character (quotes, $, globs, ~, redirections,
// operators, escapes) is bash's to read.
func Plain(line string) ([]string, bool) {
	var words []string
	for w := range strings.FieldsFuncSeq(line, func(r rune) bool { return r == ' ' || r == '\t' }) {
		for i := 0; i < len(w); i++ {
			c := w[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_./=:,+@%^-", c) >= 0) {
				return nil, false
			}
		}
		words = append(words, w)
	}
	if len(words) == 0 || strings.Contains(words[0], "=") || shellWords[words[0]] {
		return nil, false
	}
	return words, true
}

// shellWords are bash's keywords and builtins (bash 5): a line that
// starts with one is bash's, not a program's. But true and false, which do
// as their programs do.
var shellWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while
		. : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo enable eval exec
		exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly
		return set shift shopt source suspend test times trap type typeset ulimit umask unalias unset wait`) {
		m[w] = true
	}
	return m
}()
