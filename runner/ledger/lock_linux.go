//go:build linux

package ledger

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock on f without waiting; the
// kernel drops it when the process dies, however it dies.
func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// reserveFile allocates n bytes of f from off, past its end, without
// changing its size.
func reserveFile(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// noFollow and directory are open flags: fail on a symbolic link, and on
// anything but a directory.
const (
	noFollow  = unix.O_NOFOLLOW
	directory = unix.O_DIRECTORY
)

// writeOwner writes the lock's owner file in the lock directory dir, held
// open: from dir itself, following no symbolic link, so neither a link
// planted as the owner file nor the lock directory swapped for one sends
// the write elsewhere.
func writeOwner(dir *os.File, b []byte) error {
	fd, err := unix.Openat(int(dir.Fd()), "owner", unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return linkError(dir.Name()+"/owner", err)
	}
	f := os.NewFile(uintptr(fd), dir.Name()+"/owner")
	defer f.Close()
	_, err = f.Write(b)
	return err
}
