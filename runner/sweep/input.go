package sweep

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// input is a file a source's runs are read from. It is read from the
// user's file or stream once: a regular file is read where it is, up to
// the size it had when it was opened, as many times as needed (check,
// run, count what is left), so every pass sees the same bytes; a stream —
// standard input, a pipe, a FIFO, process substitution — is copied to a
// private spool file first, and every pass reads the spool.
type input struct {
	name  string   // as given; "-" is standard input
	label string   // for messages and Origin: the name, or "<stdin>"
	file  *os.File // the regular file, or the spool
	size  int64    // bytes every pass reads
}

// openInput opens name ("-" for standard input) for reading its runs.
func openInput(name string) (*input, error) {
	in := &input{name: name, label: name}
	f := os.Stdin
	if name == "-" {
		in.label = "<stdin>"
	} else {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err
		}
	}
	st, err := f.Stat()
	if err != nil {
		in.closeSource(f)
		return nil, err
	}
	switch {
	case st.IsDir():
		in.closeSource(f)
		return nil, fmt.Errorf("%s: is a directory", name)
	case st.Mode().IsRegular():
		in.file, in.size = f, st.Size()
		return in, nil
	}
	// A stream can be read once: keep what it holds in a spool file that
	// is unlinked at once, so it goes away with the process however that
	// ends.
	spool, err := os.CreateTemp("", "nodepack-input-")
	if err != nil {
		in.closeSource(f)
		return nil, fmt.Errorf("%s: spool: %w", in.label, err)
	}
	os.Remove(spool.Name())
	n, err := io.Copy(spool, f)
	in.closeSource(f)
	if err != nil {
		spool.Close()
		return nil, fmt.Errorf("%s: %w", in.label, err)
	}
	in.file, in.size = spool, n
	return in, nil
}

// closeSource closes what the user named, unless it is standard input.
func (in *input) closeSource(f *os.File) {
	if f != os.Stdin {
		f.Close()
	}
}

// reader returns a new reader of the input's bytes, from the start.
func (in *input) reader() io.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(in.file, 0, in.size), 1<<20)
}

// Close releases the file (standard input stays open).
func (in *input) Close() {
	if in != nil {
		in.closeSource(in.file)
	}
}
