package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

const completionUsage = `Usage: nodepack completion bash|zsh|fish

Prints the shell's completion script for nodepack: commands, each
command's flags, the words a flag takes (--format, --class), directories
for the commands that read a sweep's output, files for task files. It is
made from the commands' own --help, so it is as new as the binary.

Examples:
  source <(nodepack completion bash)   # bash: this line in ~/.bashrc
  mkdir -p ~/.zfunc && nodepack completion zsh > ~/.zfunc/_nodepack   # zsh: fpath+=(~/.zfunc) before compinit
  mkdir -p ~/.config/fish/completions && nodepack completion fish > ~/.config/fish/completions/nodepack.fish`

func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("completion", pflag.ContinueOnError)
	if code, ok := parseFlags(ctx, fs, completionUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "completion", "want one shell (bash, zsh or fish), got %d arguments", fs.NArg())
	}
	docs := cliDocs()
	switch fs.Arg(0) {
	case "bash":
		writeBashCompletion(stdout, docs)
	case "zsh":
		writeZshCompletion(stdout, docs)
	case "fish":
		writeFishCompletion(stdout, docs)
	default:
		return usageErrorf(stderr, "completion", "%q: nodepack writes completion for bash, zsh and fish", fs.Arg(0))
	}
	return exitOK
}

// shells are the shells completion writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// valueKind is what a flag's value is, as completion offers it.
type valueKind int

const (
	noValue      valueKind = iota // a switch: --json
	anyValue                      // a number, a size, a spec: nothing to offer
	fileValue                     // FILE, PATH
	dirValue                      // DIR
	choiceValue                   // one of choices
	optionalWord                  // --watch [D]: a switch that may take a value joined by =
)

// flagDoc is one flag as completion and the manual page show it.
type flagDoc struct {
	long, short string
	arg         string // its value's name in the help: DIR, N, SIZE
	help        string
	typ         string // pflag's name of its type: stringArray for a repeatable flag
	kind        valueKind
	choices     []string
}

// commandDoc is one command as completion and the manual page show it.
type commandDoc struct {
	command
	help  commandHelp
	flags []flagDoc
}

// cliDocs describes every command from its own flag set and usage.
func cliDocs() []commandDoc {
	var docs []commandDoc
	for _, c := range commands() {
		d := commandDoc{command: c, help: describe(c)}
		if d.help.flags != nil {
			d.help.flags.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden {
					d.flags = append(d.flags, docFlag(f))
				}
			})
		}
		docs = append(docs, d)
	}
	return docs
}

func docFlag(f *pflag.Flag) flagDoc {
	arg, help := pflag.UnquoteUsage(f)
	d := flagDoc{long: f.Name, short: f.Shorthand, arg: arg, help: help, typ: f.Value.Type()}
	switch {
	case f.Value.Type() == "bool":
		d.kind, d.arg = noValue, ""
	case f.NoOptDefVal != "":
		d.kind = optionalWord
	case len(f.Annotations[choicesKey]) > 0:
		d.kind, d.choices = choiceValue, f.Annotations[choicesKey]
	case strings.Contains(arg, "DIR"):
		d.kind = dirValue
	case strings.Contains(arg, "FILE") || arg == "PATH":
		d.kind = fileValue
	default:
		d.kind = anyValue
	}
	return d
}

// takesWord reports whether the flag's value is the next word.
func (f flagDoc) takesWord() bool { return f.kind != noValue && f.kind != optionalWord }

// words is the flag as typed: --long and, when it has one, -s.
func (f flagDoc) words() []string {
	if f.short != "" {
		return []string{"--" + f.long, "-" + f.short}
	}
	return []string{"--" + f.long}
}

// summary is the start of a flag's help, short enough for a completion
// menu: up to its first "; " or " (" (when what is left says enough), at
// most 70 characters.
func (f flagDoc) summary() string {
	s := strings.Join(strings.Fields(f.help), " ")
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

// writeBashCompletion writes a bash script: a function that reads
// COMP_WORDS as nodepack reads its arguments (the command is the first
// word that is not a flag; after submit's "--" come run's own arguments;
// after run's "--" a command) and offers what that position takes.
func writeBashCompletion(w io.Writer, docs []commandDoc) {
	var names []string
	for _, d := range docs {
		names = append(names, d.name)
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
		fmt.Fprintf(w, "    %s)\n", d.name)
		var words []string
		byKind := map[string][]string{}
		var kinds []string
		for _, f := range d.flags {
			words = append(words, f.words()...)
			if !f.takesWord() {
				continue
			}
			var action string
			switch f.kind {
			case fileValue:
				action = `_nodepack_files "$cur"`
			case dirValue:
				action = `_nodepack_dirs "$cur"`
			case choiceValue:
				action = `COMPREPLY=($(compgen -W ` + bashWord(strings.Join(f.choices, " ")) + ` -- "$cur"))`
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
		switch d.operands {
		case fileOperand:
			fmt.Fprintf(w, "        operand=files\n")
		case dirOperand:
			fmt.Fprintf(w, "        operand=dirs\n")
		case runOperands:
			fmt.Fprintf(w, "        operand=--\n")
		case shellOperand:
			fmt.Fprintf(w, "        operand=%s\n", bashWord(strings.Join(shells, " ")))
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

// writeZshCompletion writes a zsh completion function for compsys:
// _arguments with every flag and its description, then the command's
// operands.
func writeZshCompletion(w io.Writer, docs []commandDoc) {
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
		fmt.Fprintf(w, "            %s\n", zshWord(strings.ReplaceAll(d.name, ":", `\:`)+":"+d.summary))
	}
	fmt.Fprint(w, `        )
        _describe -t commands 'nodepack command' cmds && ret=0
        ;;
    args)
        curcontext=${curcontext%:*:*}:nodepack-$words[1]:
        case $words[1] in
`)
	for _, d := range docs {
		fmt.Fprintf(w, "        %s) _nodepack_%s && ret=0 ;;\n", d.name, d.name)
	}
	fmt.Fprint(w, `        esac
        ;;
    esac
    return ret
}
`)
	for _, d := range docs {
		fmt.Fprintf(w, "\n_nodepack_%s() {\n    local curcontext=$curcontext state line\n    _arguments -s -S \\\n", d.name)
		for _, f := range d.flags {
			fmt.Fprintf(w, "        %s \\\n", zshFlagSpec(f))
		}
		fmt.Fprintf(w, "        '(- *)--help[show this command'\\''s flags]'")
		switch d.operands {
		case fileOperand:
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
		case dirOperand:
			fmt.Fprint(w, " \\\n        '*:output directory:_files -/'")
		case runOperands:
			// after "--": run's own flags and arguments
			fmt.Fprint(w, ` \
        '*:: :->run' && return
    local _nodepack_dashes=2
    words=(run "${words[@]}")
    (( CURRENT++ ))
    _nodepack_run`)
		case shellOperand:
			fmt.Fprintf(w, " \\\n        %s", zshWord("1:shell:("+strings.Join(shells, " ")+")"))
		}
		fmt.Fprint(w, "\n}\n")
	}
	fmt.Fprint(w, "\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n    _nodepack \"$@\"\nelse\n    compdef _nodepack nodepack\nfi\n")
}

// zshFlagSpec is one flag as _arguments takes it:
// '(-o --output)'{-o+,--output=}'[help]:DIR:_files -/'.
func zshFlagSpec(f flagDoc) string {
	desc := "[" + zshEscape(f.summary(), "[]") + "]"
	var action string
	switch f.kind {
	case fileValue:
		action = ":" + zshEscape(f.arg, ":") + ":_files"
	case dirValue:
		action = ":" + zshEscape(f.arg, ":") + ":_files -/"
	case choiceValue:
		action = ":" + zshEscape(f.arg, ":") + ":(" + strings.Join(f.choices, " ") + ")"
	case anyValue:
		arg := f.arg
		if arg == "" {
			arg = "value"
		}
		action = ":" + zshEscape(arg, ":") + ": "
	}
	repeat := strings.Contains(f.help, "repeatable") || strings.HasSuffix(f.typ, "Array")
	suffix := ""
	switch {
	case f.takesWord():
		suffix = "=" // --flag=value or --flag value
	case f.kind == optionalWord:
		suffix = "=-" // only --flag=value
	}
	star := ""
	if repeat {
		star = "*"
	}
	if f.short == "" {
		return zshWord(star + "--" + f.long + suffix + desc + action)
	}
	shortSuffix := ""
	if f.takesWord() {
		shortSuffix = "+"
	}
	excl := ""
	if !repeat {
		excl = "(-" + f.short + " --" + f.long + ")"
	}
	return zshWord(excl) + "{" + star + "-" + f.short + shortSuffix + "," + star + "--" + f.long + suffix + "}" + zshWord(desc+action)
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

// writeFishCompletion writes fish's complete commands. __nodepack_cmd
// names the command being completed as the bash script reads it: run
// after submit's "--"; after run's, run--1 for the command's own name and
// run-- for its arguments.
func writeFishCompletion(w io.Writer, docs []commandDoc) {
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
		fmt.Fprintf(w, "complete -c nodepack -n 'test -z (__nodepack_cmd)' -a %s -d %s\n", fishWord(d.name), fishWord(d.summary))
	}
	for _, d := range docs {
		cond := fishWord("test (__nodepack_cmd) = " + d.name)
		for _, f := range d.flags {
			line := "complete -c nodepack -n " + cond + " -l " + fishWord(f.long)
			if f.short != "" {
				line += " -s " + fishWord(f.short)
			}
			switch f.kind {
			case fileValue:
				line += " -r -F"
			case dirValue:
				line += " -x -a '(__fish_complete_directories)'"
			case choiceValue:
				// value\t: each choice with no description of its own
				line += " -x -a " + fishWord(strings.Join(f.choices, `\t `)+`\t`)
			case anyValue:
				line += " -x"
			}
			fmt.Fprintf(w, "%s -d %s\n", line, fishWord(f.summary()))
		}
		if d.operands == runOperands {
			// fish completes no flags after "--": run's, after submit's
			// "--", are offered as words.
			for _, f := range docs[slices.IndexFunc(docs, func(d commandDoc) bool { return d.name == "run" })].flags {
				for _, word := range f.words() {
					fmt.Fprintf(w, "complete -c nodepack -n %s -a %s -d %s\n",
						fishWord("test (__nodepack_cmd) = run; and contains -- -- (commandline -opc)"), fishWord(word), fishWord(f.summary()))
				}
			}
		}
		fmt.Fprintf(w, "complete -c nodepack -n %s -l help -d 'show this command'\\''s flags'\n", cond)
		switch d.operands {
		case fileOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -F\n", cond)
		case dirOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -a '(__fish_complete_directories)'\n", cond)
		case shellOperand:
			fmt.Fprintf(w, "complete -c nodepack -n %s -a %s\n", cond, fishWord(strings.Join(shells, " ")))
		}
	}
}

// fishWord quotes s as one word of fish.
func fishWord(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
