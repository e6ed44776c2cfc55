package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestEachBlock: every whole line comes to apply once, in order, with its
// number and offset, whatever the blocks' cuts: lines longer than a
// block, a reader that returns a byte at a time, an unfinished last line
// (torn); an apply that fails stops the read without a hang.
func TestEachBlock(t *testing.T) {
	var text strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&text, "line %d %s\n", i+1, strings.Repeat("x", i%700))
	}
	long := strings.Repeat("y", 3*blockSize+17)
	text.WriteString(long + "\n")
	text.WriteString("last\n")
	text.WriteString("torn")
	whole := text.String()
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"a file", strings.NewReader(whole)},
		{"a byte at a time", iotest.OneByteReader(strings.NewReader(whole))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var wantNo int32 = 1
			var wantOff int64
			torn, err := eachBlock(tc.r, func(b *block[string]) {
				lines(b.data, func(k int, line []byte) { b.out = append(b.out, string(line)) })
			}, func(b *block[string]) error {
				if b.first != wantNo || b.off != wantOff {
					return fmt.Errorf("block at line %d offset %d, want %d %d", b.first, b.off, wantNo, wantOff)
				}
				wantNo += int32(len(b.out))
				wantOff += int64(len(b.data))
				got = append(got, b.out...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Split(strings.TrimSuffix(whole, "torn"), "\n")
			want = want[:len(want)-1]
			if len(got) != len(want) || torn != 4 {
				t.Fatalf("%d lines, torn %d; want %d and 4", len(got), torn, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("line %d: %.40q, want %.40q", i+1, got[i], want[i])
				}
			}
		})
	}
	t.Run("apply fails", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		_, err := eachBlock(strings.NewReader(whole), func(b *block[int]) {}, func(b *block[int]) error {
			if n++; n == 2 {
				return stop
			}
			return nil
		})
		if err != stop || n != 2 {
			t.Errorf("err %v after %d blocks, want stop after 2", err, n)
		}
	})
	t.Run("a read error", func(t *testing.T) {
		bad := errors.New("disk")
		_, err := eachBlock(iotest.TimeoutReader(bytes.NewReader([]byte(whole))), func(b *block[int]) {}, func(b *block[int]) error { return nil })
		if err == nil {
			t.Errorf("a reader's error is no error")
		}
		_, err = eachBlock(iotest.ErrReader(bad), func(b *block[int]) {}, func(b *block[int]) error { return nil })
		if !errors.Is(err, bad) {
			t.Errorf("err %v, want %v", err, bad)
		}
	})
}
