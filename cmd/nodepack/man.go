package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

const manUsage = `Usage: nodepack man

Prints nodepack's manual page, in roff, made from every command's --help:
what each command does, its flags with their defaults, its examples, and
the exit statuses.

Examples:
  nodepack man | man -l -
  mkdir -p ~/.local/share/man/man1 && nodepack man > ~/.local/share/man/man1/nodepack.1`

func runMan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("man", pflag.ContinueOnError)
	if code, ok := parseFlags(ctx, fs, manUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageErrorf(stderr, "man", "takes no arguments, got %d", fs.NArg())
	}
	writeMan(stdout, cliDocs(), nodepackVersion())
	return exitOK
}

// writeMan writes the manual page: each command's usage text as its help
// prints it (prose filled, indented lines kept as they are), then its flags.
func writeMan(w io.Writer, docs []commandDoc, version string) {
	intro, _, _ := strings.Cut(mainUsage, "\n\n")
	fmt.Fprintf(w, ".TH NODEPACK 1 \"\" %s \"User Commands\"\n", roffQuoted("nodepack "+version))
	fmt.Fprintf(w, ".SH NAME\nnodepack \\- pack many small runs onto the GPUs and cores of one node\n")
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B nodepack\n\\fIcommand\\fR [\\fIflags\\fR] [\\fIarguments\\fR]\n.br\n.B nodepack\n\\fIcommand\\fR \\fB\\-\\-help\\fR\n")
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n", roff(strings.Join(strings.Fields(intro), " ")))
	fmt.Fprintf(w, ".SH COMMANDS\n")
	for _, d := range docs {
		fmt.Fprintf(w, ".SS %s\n%s.\n", roffQuoted("nodepack "+d.name), roff(upperFirst(d.summary)))
		writeManText(w, d.help.usage)
		if len(d.flags) == 0 {
			continue
		}
		groups := []flagGroup{{title: "Flags"}}
		if h, ok := helpGroups[d.name]; ok {
			groups = h.groups
		}
		for _, g := range groups {
			fmt.Fprintf(w, ".PP\n\\fB%s:\\fR\n", roff(g.title))
			for _, f := range d.flags {
				if g.flags == nil || slices.Contains(g.flags, f.long) {
					writeManFlag(w, d.help.flags.Lookup(f.long), f)
				}
			}
			for _, e := range g.examples {
				fmt.Fprintf(w, ".PP\ne.g.\n.RS\n.nf\n%s\n.fi\n.RE\n", roff(e))
			}
		}
		if h, ok := helpGroups[d.name]; ok && h.details != "" {
			writeManText(w, h.details)
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
func writeManFlag(w io.Writer, f *pflag.Flag, d flagDoc) {
	tag := `\fB\-\-` + roff(d.long) + `\fR`
	if d.short != "" {
		tag = `\fB\-` + roff(d.short) + `\fR, ` + tag
	}
	if d.arg != "" {
		sep := " "
		if d.kind == optionalWord {
			sep = "[="
		}
		tag += sep + `\fI` + roff(d.arg) + `\fR`
		if d.kind == optionalWord {
			tag += "]"
		}
	}
	help := d.help
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
