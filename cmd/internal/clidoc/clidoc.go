// Package clidoc writes what the nodepack command says of itself in the
// forms other than --help: the completion scripts of bash, zsh and fish
// and the manual page (roff), from each command's own flag set and usage
// text, so that the help is written once and every form is as new as the
// binary. It prints; it parses nothing and runs nothing.
package clidoc

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

// Operands is what a command's arguments are, as completion offers them.
type Operands int

const (
	NoOperands   Operands = iota
	FileOperand           // a task file; run also takes "-- COMMAND…"
	DirOperand            // a sweep's output directory
	RunOperands           // submit: "-- " and then run's flags and arguments
	ShellOperand          // completion: a shell's name
)

// ChoicesKey annotates a flag whose value is one of a few words, which the
// completion scripts offer: OfferChoices.
const ChoicesKey = "nodepack-choices"

// OfferChoices marks fs's flag name as taking one of values.
func OfferChoices(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, ChoicesKey, values); err != nil {
		panic(err) // a flag the caller defines: a typo is a bug
	}
}

// WriteHelp writes c's --help: its usage text, then its flags group by
// group, then its details; every flag must be in one group.
func WriteHelp(w io.Writer, c Command) {
	fmt.Fprintln(w, c.Usage)
	for _, g := range c.groups() {
		sub := pflag.NewFlagSet(g.Title, pflag.ContinueOnError)
		sub.SortFlags = false
		names := g.Flags
		if names == nil && c.Flags != nil {
			c.Flags.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		}
		for _, name := range names {
			if f := c.Flags.Lookup(name); f != nil {
				sub.AddFlag(f)
			}
		}
		fmt.Fprintf(w, "\n%s:\n%s", g.Title, sub.FlagUsages())
		for _, e := range g.Examples {
			fmt.Fprintf(w, "    e.g. %s\n", e)
		}
	}
	if c.Details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Details, "\n"))
	}
}

// Shells are the Shells completion writes a script for.
var Shells = []string{"bash", "zsh", "fish"}

// ValueKind is what a flag's value is, as completion offers it.
type ValueKind int

const (
	NoValue      ValueKind = iota // a switch: --json
	AnyValue                      // a number, a size, a spec: nothing to offer
	FileValue                     // FILE, PATH
	DirValue                      // DIR
	ChoiceValue                   // one of Choices
	OptionalWord                  // --watch [D]: a switch that may take a value joined by =
)

// Flag is one flag as completion and the manual page show it.
type Flag struct {
	Long, Short string
	Arg         string // its value's name in the help: DIR, N, SIZE
	Help        string
	Type        string // pflag's name of its type: stringArray for a repeatable flag
	Kind        ValueKind
	Choices     []string
}

// Command is one command of the program as its --help shows it.
type Command struct {
	Name, Summary string
	Operands      Operands
	Usage         string         // its usage text, as --help prints it first
	Flags         *pflag.FlagSet // nil: none
	// Groups are its flags in groups, as its --help shows them; nil is
	// one group, "Flags", of them all.
	Groups  []Group
	Details string // printed after its flags
}

// Group is a group of a command's flags in its help: a title, the flags
// by name, and examples that use them.
type Group struct {
	Title    string
	Flags    []string
	Examples []string
}

// groups returns c's groups: its own, else one of every flag.
func (c Command) groups() []Group {
	if c.Groups != nil {
		return c.Groups
	}
	return []Group{{Title: "Flags"}}
}

// FlagsOf returns c's flags that are not hidden, in the order of its help.
func FlagsOf(c Command) []Flag {
	var flags []Flag
	if c.Flags != nil {
		c.Flags.SortFlags = false
		c.Flags.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				flags = append(flags, docFlag(f))
			}
		})
	}
	return flags
}

func docFlag(f *pflag.Flag) Flag {
	arg, help := pflag.UnquoteUsage(f)
	d := Flag{Long: f.Name, Short: f.Shorthand, Arg: arg, Help: help, Type: f.Value.Type()}
	switch {
	case f.Value.Type() == "bool":
		d.Kind, d.Arg = NoValue, ""
	case f.NoOptDefVal != "":
		d.Kind = OptionalWord
	case len(f.Annotations[ChoicesKey]) > 0:
		d.Kind, d.Choices = ChoiceValue, f.Annotations[ChoicesKey]
	case strings.Contains(arg, "DIR"):
		d.Kind = DirValue
	case strings.Contains(arg, "FILE") || arg == "PATH":
		d.Kind = FileValue
	default:
		d.Kind = AnyValue
	}
	return d
}

// takesWord reports whether the flag's value is the next word.
func (f Flag) takesWord() bool { return f.Kind != NoValue && f.Kind != OptionalWord }

// words is the flag as typed: --long and, when it has one, -s.
func (f Flag) words() []string {
	if f.Short != "" {
		return []string{"--" + f.Long, "-" + f.Short}
	}
	return []string{"--" + f.Long}
}

// summary is the start of a flag's help, short enough for a completion
// menu: up to its first "; " or " (" (when what is left says enough), at
// most 70 characters.
func (f Flag) summary() string {
	s := strings.Join(strings.Fields(f.Help), " ")
	if i := strings.Index(s, "; "); i >= 12 {
		s = s[:i]
	}
	if i := strings.Index(s, " ("); i >= 24 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) > 70 {
		r := []rune(s)[:69]
		if i := strings.LastIndexByte(string(r), ' '); i > 40 {
			r = []rune(string(r)[:i])
		}
		s = string(r) + "…"
	}
	return s
}

// ---- bash ----

// Bash writes a bash script: a function that reads
// COMP_WORDS as nodepack reads its arguments (the command is the first
// word that is not a flag; after submit's "--" come run's own arguments;
// after run's "--" a command) and offers what that position takes.
func Bash(w io.Writer, docs []Command) {
	var names []string
	for _, d := range docs {
		names = append(names, d.Name)
	}
	fmt.Fprintf(w, `# bash completion for nodepack (made by: nodepack completion bash)
_nodepack_files() { compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$1")); }
_nodepack_dirs() { compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$1")); }
_nodepack() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= dashdash=0 i w
    # --flag=value: bash splits it at the =.
    if [[ $cur == = ]]; then cur=
    elif [[ $prev == = && $COMP_CWORD -ge 2 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}
    fi
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ -z $cmd ]]; then
            [[ $w != -* ]] && cmd=$w
        elif [[ $w == -- ]]; then
            if [[ $cmd == submit ]]; then cmd=run; else dashdash=$i; break; fi
        fi
    done
    COMPREPLY=()
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W %s -- "$cur"))
        return
    fi
    if ((dashdash > 0)); then
        # a command and its arguments: bash-completion's own, where it is loaded
        if declare -F _command_offset >/dev/null; then _command_offset $((dashdash + 1))
        elif ((dashdash == COMP_CWORD - 1)); then COMPREPLY=($(compgen -c -- "$cur"))
        else _nodepack_files "$cur"
        fi
        return
    fi
    local flags= operand=
    case $cmd in
`, bashWord(strings.Join(append(names, "--help", "--version"), " ")))
	for _, d := range docs {
		fmt.Fprintf(w, "    %s)\n", d.Name)
		var words []string
		byKind := map[string][]string{}
		var kinds []string
		for _, f := range FlagsOf(d) {
			words = append(words, f.words()...)
			if !f.takesWord() {
				continue
			}
			var action string
			switch f.Kind {
			case FileValue:
				action = `_nodepack_files "$cur"`
			case DirValue:
				action = `_nodepack_dirs "$cur"`
			case ChoiceValue:
				action = `COMPREPLY=($(compgen -W ` + bashWord(strings.Join(f.Choices, " ")) + ` -- "$cur"))`
			default:
				action = ":"
			}
			if _, ok := byKind[action]; !ok {
				kinds = append(kinds, action)
			}
			byKind[action] = append(byKind[action], f.words()...)
		}
		if len(kinds) > 0 {
			fmt.Fprintf(w, "        case $prev in\n")
			for _, action := range kinds {
				fmt.Fprintf(w, "        %s) %s; return ;;\n", strings.Join(byKind[action], "|"), action)
			}
			fmt.Fprintf(w, "        esac\n")
		}
		words = append(words, "--help")
		fmt.Fprintf(w, "        flags=%s\n", bashWord(strings.Join(words, " ")))
		switch d.Operands {
		case FileOperand:
			fmt.Fprintf(w, "        operand=files\n")
		case DirOperand:
			fmt.Fprintf(w, "        operand=dirs\n")
		case RunOperands:
			fmt.Fprintf(w, "        operand=--\n")
		case ShellOperand:
			fmt.Fprintf(w, "        operand=%s\n", bashWord(strings.Join(Shells, " ")))
		}
		fmt.Fprintf(w, "        ;;\n")
	}
	fmt.Fprint(w, `    *) return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    case $operand in
    files) _nodepack_files "$cur" ;;
    dirs) _nodepack_dirs "$cur" ;;
    '') ;;
    *) COMPREPLY=($(compgen -W "$operand" -- "$cur")) ;;
    esac
}
complete -F _nodepack nodepack
`)
}

// bashWord quotes s as one word of bash.
func bashWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---- zsh ----

// Zsh writes a zsh completion function for compsys:
// _arguments with every flag and its description, then the command's
// operands.
func Zsh(w io.Writer, docs []Command) {
	fmt.Fprint(w, `#compdef nodepack
# zsh completion for nodepack (made by: nodepack completion zsh)

_nodepack() {
    local curcontext=$curcontext state line ret=1
    _arguments -C \
        '(- *)--help[show the commands]' \
        '(- *)--version[print the version]' \
        '1: :->command' \
        '*:: :->args' && ret=0
    case $state in
    command)
        local -a cmds
        cmds=(
`)
	for _, d := range docs {
		fmt.Fprintf(w, "            %s\n", zshWord(strings.ReplaceAll(d.Name, ":", `\:`)+":"+d.Summary))
	}
	fmt.Fprint(w, `        )
        _describe -t commands 'nodepack command' cmds && ret=0
        ;;
    args)
        curcontext=${curcontext%:*:*}:nodepack-$words[1]:
        case $words[1] in
`)
	for _, d := range docs {
		fmt.Fprintf(w, "        %s) _nodepack_%s && ret=0 ;;\n", d.Name, d.Name)
	}
	fmt.Fprint(w, `        esac
        ;;
    esac
    return ret
}
`)
	for _, d := range docs {
		fmt.Fprintf(w, "\n_nodepack_%s() {\n    local curcontext=$curcontext state line\n    _arguments -s -S \\\n", d.Name)
		for _, f := range FlagsOf(d) {
			fmt.Fprintf(w, "        %s \\\n", zshFlagSpec(f))
		}
		fmt.Fprintf(w, "        '(- *)--help[show this command'\\''s flags]'")
		switch d.Operands {
		case FileOperand:
			// a task file, or after "--" a command and its arguments
			// (_arguments drops the "--" from words: count them on the
			// line, one more when run's arguments follow submit's "--")
			fmt.Fprint(w, ` \
        '*:: :->operand' && return
    local w n=0
    for w in ${(z)LBUFFER}; do [[ $w == -- ]] && (( n++ )); done
    if (( n >= ${_nodepack_dashes:-1} )); then
        _normal
    else
        _files
    fi`)
		case DirOperand:
			fmt.Fprint(w, " \\\n        '*:output directory:_files -/'")
		case RunOperands:
			// after "--": run's own flags and arguments
			fmt.Fprint(w, ` \
        '*:: :->run' && return
    local _nodepack_dashes=2
    words=(run "${words[@]}")
    (( CURRENT++ ))
    _nodepack_run`)
		case ShellOperand:
			fmt.Fprintf(w, " \\\n        %s", zshWord("1:shell:("+strings.Join(Shells, " ")+")"))
		}
		fmt.Fprint(w, "\n}\n")
	}
	fmt.Fprint(w, "\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n    _nodepack \"$@\"\nelse\n    compdef _nodepack nodepack\nfi\n")
}

// zshFlagSpec is one flag as _arguments takes it:
// '(-o --output)'{-o+,--output=}'[help]:DIR:_files -/'.
func zshFlagSpec(f Flag) string {
	desc := "[" + zshEscape(f.summary(), "[]") + "]"
	var action string
	switch f.Kind {
	case FileValue:
		action = ":" + zshEscape(f.Arg, ":") + ":_files"
	case DirValue:
		action = ":" + zshEscape(f.Arg, ":") + ":_files -/"
	case ChoiceValue:
		action = ":" + zshEscape(f.Arg, ":") + ":(" + strings.Join(f.Choices, " ") + ")"
	case AnyValue:
		arg := f.Arg
		if arg == "" {
			arg = "value"
		}
		action = ":" + zshEscape(arg, ":") + ": "
	}
	repeat := strings.Contains(f.Help, "repeatable") || strings.HasSuffix(f.Type, "Array")
	suffix := ""
	switch {
	case f.takesWord():
		suffix = "=" // --flag=value or --flag value
	case f.Kind == OptionalWord:
		suffix = "=-" // only --flag=value
	}
	star := ""
	if repeat {
		star = "*"
	}
	if f.Short == "" {
		return zshWord(star + "--" + f.Long + suffix + desc + action)
	}
	shortSuffix := ""
	if f.takesWord() {
		shortSuffix = "+"
	}
	excl := ""
	if !repeat {
		excl = "(-" + f.Short + " --" + f.Long + ")"
	}
	return zshWord(excl) + "{" + star + "-" + f.Short + shortSuffix + "," + star + "--" + f.Long + suffix + "}" + zshWord(desc+action)
}

// zshEscape puts a backslash before each of special and before a backslash.
func zshEscape(s, special string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\\' || strings.ContainsRune(special, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// zshWord quotes s as one word of zsh.
func zshWord(s string) string {
	if s == "" {
		return ""
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---- fish ----

// Fish writes fish's complete commands. __nodepack_cmd
// names the command being completed as the bash script reads it: run
// after submit's "--"; after run's, run--1 for the command's own name and
// run-- for its arguments.
func Fish(w io.Writer, docs []Command) {
	fmt.Fprint(w, `# fish completion for nodepack (made by: nodepack completion fish)
function __nodepack_cmd
    set -l cmd
    for w in (commandline -opc)[2..-1]
        if test -z "$cmd"
            string match -q -- '-*' $w; or set cmd $w
        else if test "$w" = --
            if test "$cmd" = submit
                set cmd run
            else if test "$w" = (commandline -opc)[-1]
                set cmd $cmd--1 # the word after "--": a command
                break
            else
                set cmd $cmd--
                break
            end
        end
    end
    echo $cmd
end
complete -c nodepack -f
complete -c nodepack -n 'test -z (__nodepack_cmd)' -l help -d 'show the commands'
complete -c nodepack -n 'test -z (__nodepack_cmd)' -l version -d 'print the version'
complete -c nodepack -n 'test (__nodepack_cmd) = run--1' -x -a '(__fish_complete_command)'
complete -c nodepack -n 'test (__nodepack_cmd) = run--' -F
`)
	for _, d := range docs {
		fmt.Fprintf(w, "complete -c nodepack -n 'test -z (__nodepack_cmd)' -a %s -d %s\n", fishWord(d.Name), fishWord(d.Summary))
	}
	for _, d := range docs {
		cond := fishWord("test (__nodepack_cmd) = " + d.Name)
		for _, f := range FlagsOf(d) {
			line := "complete -c nodepack -n " + cond + " -l " + fishWord(f.Long)
			if f.Short != "" {
				line += " -s " + fishWord(f.Short)
			}
			switch f.Kind {
			case FileValue:
				line += " -r -F"
			case DirValue:
				line += " -x -a '(__fish_complete_directories)'"
			case ChoiceValue:
				// value\t: each choice with no description of its own
				line += " -x -a " + fishWord(strings.Join(f.Choices, `\t `)+`\t`)
			case AnyValue:
				line += " -x"
			}
			fmt.Fprintf(w, "%s -d %s\n", line, fishWord(f.summary()))
		}
		if d.Operands == RunOperands {
			// fish completes no flags after "--": run's, after submit's
			// "--", are offered as words.
			for _, f := range FlagsOf(docs[slices.IndexFunc(docs, func(d Command) bool { return d.Name == "run" })]) {
				for _, word := range f.words() {
					fmt.Fprintf(w, "complete -c nodepack -n %s -a %s -d %s\n",
						fishWord("test (__nodepack_cmd) = run; and contains -- -- (commandline -opc)"), fishWord(word), fishWord(f.summary()))
				}
			}
		}
		fmt.Fprintf(w, "complete -c nodepack -n %s -l help -d 'show this command'\\''s flags'\n", cond)
		switch d.Operands {
		case FileOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -F\n", cond)
		case DirOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -a '(__fish_complete_directories)'\n", cond)
		case ShellOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -a %s\n", cond, fishWord(strings.Join(Shells, " ")))
		}
	}
}

// fishWord quotes s as one word of fish.
func fishWord(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// writeMan writes the manual page: each command's usage text as its help
// prints it (prose filled, indented lines kept as they are), then its flags.
func Man(w io.Writer, docs []Command, intro, version string) {
	fmt.Fprintf(w, ".TH NODEPACK 1 \"\" %s \"User Commands\"\n", roffQuoted("nodepack "+version))
	fmt.Fprintf(w, ".SH NAME\nnodepack \\- pack many small runs onto the GPUs and cores of one node\n")
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B nodepack\n\\fIcommand\\fR [\\fIflags\\fR] [\\fIarguments\\fR]\n.br\n.B nodepack\n\\fIcommand\\fR \\fB\\-\\-help\\fR\n")
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n", roff(strings.Join(strings.Fields(intro), " ")))
	fmt.Fprintf(w, ".SH COMMANDS\n")
	for _, d := range docs {
		fmt.Fprintf(w, ".SS %s\n%s.\n", roffQuoted("nodepack "+d.Name), roff(upperFirst(d.Summary)))
		writeManText(w, d.Usage)
		if len(FlagsOf(d)) == 0 {
			continue
		}
		for _, g := range d.groups() {
			fmt.Fprintf(w, ".PP\n\\fB%s:\\fR\n", roff(g.Title))
			for _, f := range FlagsOf(d) {
				if g.Flags == nil || slices.Contains(g.Flags, f.Long) {
					writeManFlag(w, d.Flags.Lookup(f.Long), f)
				}
			}
			for _, e := range g.Examples {
				fmt.Fprintf(w, ".PP\ne.g.\n.RS\n.nf\n%s\n.fi\n.RE\n", roff(e))
			}
		}
		if d.Details != "" {
			writeManText(w, d.Details)
		}
	}
	fmt.Fprintf(w, `.SH EXIT STATUS
.TP
0
every run succeeded, or was skipped as done
.TP
1
a run failed
.TP
2
bad input: one line on standard error names the file, line and problem, before anything starts
.TP
128+\fIsignal\fR
nodepack was interrupted (130 for SIGINT, 143 for SIGTERM); rerun the same command to resume
.SH SEE ALSO
.BR sbatch (1),
.BR qsub (1),
.BR parallel (1)
`)
}

// writeManFlag writes one flag as a tagged paragraph: -o, --output DIR.
func writeManFlag(w io.Writer, f *pflag.Flag, d Flag) {
	tag := `\fB\-\-` + roff(d.Long) + `\fR`
	if d.Short != "" {
		tag = `\fB\-` + roff(d.Short) + `\fR, ` + tag
	}
	if d.Arg != "" {
		sep := " "
		if d.Kind == OptionalWord {
			sep = "[="
		}
		tag += sep + `\fI` + roff(d.Arg) + `\fR`
		if d.Kind == OptionalWord {
			tag += "]"
		}
	}
	help := d.Help
	if f != nil && !zeroDefault(f.DefValue) {
		help += " (default " + f.DefValue + ")"
	}
	fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, roff(strings.Join(strings.Fields(help), " ")))
}

// zeroDefault reports whether a flag's default says nothing worth printing.
func zeroDefault(v string) bool {
	switch v {
	case "", "false", "0", "0s", "[]", "<nil>":
		return true
	}
	return false
}

// writeManText writes a command's usage text: paragraphs of prose are
// filled; paragraphs of indented lines (examples, lists) and headings
// such as "Examples:" keep their lines.
func writeManText(w io.Writer, text string) {
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(para, "\n")
		head := ""
		if strings.HasSuffix(lines[0], ":") && !strings.HasPrefix(lines[0], " ") {
			head, lines = lines[0], lines[1:]
		}
		fmt.Fprintf(w, ".PP\n")
		if head != "" {
			fmt.Fprintf(w, "\\fB%s\\fR\n", roff(head))
		}
		if len(lines) == 0 {
			continue
		}
		if strings.HasPrefix(lines[0], " ") || strings.HasPrefix(lines[0], "Usage:") {
			fmt.Fprintf(w, ".nf\n")
			for _, l := range lines {
				fmt.Fprintf(w, "%s\n", roff(l))
			}
			fmt.Fprintf(w, ".fi\n")
			continue
		}
		fmt.Fprintf(w, "%s\n", roff(strings.Join(strings.Fields(strings.Join(lines, " ")), " ")))
	}
}

// roff escapes text for a roff input line: backslashes, hyphens (so
// that flags copy as typed), characters beyond ASCII as \[uXXXX], and a
// leading dot or quote.
func roff(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r == '\t':
			b.WriteString("        ")
		case r < ' ' || r == 0x7f:
			// control bytes have no place in a page
		case r > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

// roffQuoted is s as one quoted argument of a roff request.
func roffQuoted(s string) string {
	return `"` + strings.ReplaceAll(roff(s), `"`, `\(dq`) + `"`
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Markdown writes the reference of every command and flag as
// Markdown, from the same help as the manual page: docs/cli.md
// (TestCLIReference keeps it so).
func Markdown(w io.Writer, docs []Command) {
	fmt.Fprint(w, "# Every command and flag\n\n")
	fmt.Fprint(w, "Made from the commands' own `--help` (`nodepack CMD --help` prints the same;\n`nodepack man` is this as a manual page). The examples are run by the tests.\n\n")
	for _, d := range docs {
		fmt.Fprintf(w, "- [nodepack %s](#nodepack-%s): %s\n", d.Name, d.Name, d.Summary)
	}
	for _, d := range docs {
		fmt.Fprintf(w, "\n## nodepack %s\n\n%s.\n\n```\n%s\n```\n", d.Name, upperFirst(d.Summary), strings.TrimRight(d.Usage, "\n"))
		if len(FlagsOf(d)) == 0 {
			continue
		}
		groups := d.Groups
		if groups == nil {
			groups = []Group{{Title: "Flags"}}
		}
		for _, g := range groups {
			fmt.Fprintf(w, "\n%s:\n\n| flag | what it does |\n| --- | --- |\n", g.Title)
			for _, f := range FlagsOf(d) {
				if g.Flags != nil && !slices.Contains(g.Flags, f.Long) {
					continue
				}
				name := "--" + f.Long
				if f.Short != "" {
					name = "-" + f.Short + ", " + name
				}
				if f.Arg != "" {
					name += " " + f.Arg
				}
				help := strings.Join(strings.Fields(f.Help), " ")
				if fl := d.Flags.Lookup(f.Long); fl != nil && !zeroDefault(fl.DefValue) {
					help += " (default " + fl.DefValue + ")"
				}
				fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(name, "|", `\|`), markdownCell(help))
			}
			if len(g.Examples) > 0 {
				// In a block of its own, as the usage's examples are: the
				// tests run them from --help, not from here.
				fmt.Fprintf(w, "\n```\n%s\n```\n", strings.Join(g.Examples, "\n"))
			}
		}
		if d.Details != "" {
			fmt.Fprintf(w, "\n```\n%s\n```\n", strings.TrimRight(d.Details, "\n"))
		}
	}
}

// markdownCell makes s safe in a Markdown table cell: a | would end it,
// and < > & and ` are HTML's or code's.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "&", "&amp;", "`", "'").Replace(s)
}
