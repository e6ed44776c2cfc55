package ledger

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
)

// A ledger of millions of records is read in blocks of whole lines: one
// goroutine reads, several read each block's lines (scan or decode them,
// the costly part), and the caller's goroutine takes the blocks in the
// file's order (the fold is a sequence). On a node of many cores, reading
// back a sweep is as fast as the disk.

// blockSize is how many bytes of lines a block holds, but for a line
// longer than that, which a block holds alone.
const blockSize = 1 << 20

// block is a run of whole lines of a file.
type block[T any] struct {
	data  []byte // the lines, each with its newline
	first int32  // the number of its first line, from 1
	off   int64  // where it starts in the file
	out   []T    // what work made of its lines
	err   error  // work's
	done  chan struct{}
}

// readers bounds the goroutines that read blocks at once.
func blockReaders() int { return max(1, min(runtime.GOMAXPROCS(0), 8)) }

// eachBlock reads r's whole lines in blocks, calls work on each (up to
// blockReaders() blocks at once, each in a goroutine of its own when there is
// more than one block), and calls apply with each, in order. It returns
// the length of an unfinished last line, which no block holds, and the
// first error of r, work or apply: apply is not called after it. Lines
// are numbered from 1; a block's first line number is counted as it is
// cut.
func eachBlock[T any](r io.Reader, work func(b *block[T]), apply func(b *block[T]) error) (torn int64, err error) {
	n := blockReaders()
	queue := make(chan *block[T], 2*n) // in the file's order
	jobs := make(chan *block[T])
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				work(b)
				close(b.done)
			}
		}()
	}
	var readErr error
	var readTorn int64
	go func() {
		defer close(queue)
		defer close(jobs)
		var carry []byte // the start of a line the last read cut
		no, off := int32(1), int64(0)
		buf := make([]byte, blockSize)
		for {
			copy(buf, carry)
			k, err := io.ReadFull(r, buf[len(carry):])
			data := buf[:len(carry)+k]
			end := bytes.LastIndexByte(data, '\n') + 1
			if end == 0 && err == nil {
				// A line longer than a block: read on.
				carry = data
				buf = make([]byte, 2*len(buf))
				continue
			}
			if end > 0 {
				b := &block[T]{data: data[:end:end], first: no, off: off, done: make(chan struct{})}
				no += int32(bytes.Count(b.data, []byte{'\n'}))
				off += int64(end)
				select {
				case queue <- b:
				case <-stop:
					return
				}
				select {
				case jobs <- b:
				case <-stop:
					close(b.done) // queued, never read: nothing waits for it
					return
				}
			}
			carry = append([]byte(nil), data[end:]...)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					readErr = err
				}
				readTorn = int64(len(carry))
				return
			}
			buf = make([]byte, max(blockSize, 2*len(carry)))
		}
	}()
	defer func() {
		close(stop)
		for b := range queue {
			<-b.done // let the readers finish what they took
		}
		wg.Wait()
	}()
	for b := range queue {
		<-b.done
		if err := apply(b); err != nil {
			return 0, err
		}
	}
	return readTorn, readErr
}

// lines calls f with each line of data (without its newline) and its
// place among them.
func lines(data []byte, f func(k int, line []byte)) {
	for k := 0; len(data) > 0; k++ {
		i := bytes.IndexByte(data, '\n')
		f(k, data[:i])
		data = data[i+1:]
	}
}
