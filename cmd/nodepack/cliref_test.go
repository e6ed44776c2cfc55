package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeMarkdown writes the reference of every command and flag as
// Markdown, from the same help as the manual page: docs/cli.md
// (TestCLIReference keeps it so).
func writeMarkdown(w io.Writer, docs []commandDoc) {
	fmt.Fprint(w, "# Every command and flag\n\n")
	fmt.Fprint(w, "Made from the commands' own `--help` (`nodepack CMD --help` prints the same;\n`nodepack man` is this as a manual page). The examples are run by the tests.\n\n")
	for _, d := range docs {
		fmt.Fprintf(w, "- [nodepack %s](#nodepack-%s): %s\n", d.name, d.name, d.summary)
	}
	for _, d := range docs {
		fmt.Fprintf(w, "\n## nodepack %s\n\n%s.\n\n```\n%s\n```\n", d.name, upperFirst(d.summary), strings.TrimRight(d.help.usage, "\n"))
		if len(d.flags) == 0 {
			continue
		}
		groups := []flagGroup{{title: "Flags"}}
		if h, ok := helpGroups[d.name]; ok {
			groups = h.groups
		}
		for _, g := range groups {
			fmt.Fprintf(w, "\n%s:\n\n| flag | what it does |\n| --- | --- |\n", g.title)
			for _, f := range d.flags {
				if g.flags != nil && !slices.Contains(g.flags, f.long) {
					continue
				}
				name := "--" + f.long
				if f.short != "" {
					name = "-" + f.short + ", " + name
				}
				if f.arg != "" {
					name += " " + f.arg
				}
				help := strings.Join(strings.Fields(f.help), " ")
				if fl := d.help.flags.Lookup(f.long); fl != nil && !zeroDefault(fl.DefValue) {
					help += " (default " + fl.DefValue + ")"
				}
				fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(name, "|", `\|`), markdownCell(help))
			}
			if len(g.examples) > 0 {
				// In a block of its own, as the usage's examples are: the
				// tests run them from --help, not from here.
				fmt.Fprintf(w, "\n```\n%s\n```\n", strings.Join(g.examples, "\n"))
			}
		}
		if h, ok := helpGroups[d.name]; ok && h.details != "" {
			fmt.Fprintf(w, "\n```\n%s\n```\n", strings.TrimRight(h.details, "\n"))
		}
	}
}

// markdownCell makes s safe in a Markdown table cell: a | would end it,
// and < > & and ` are HTML's or code's.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "&", "&amp;", "`", "'").Replace(s)
}
