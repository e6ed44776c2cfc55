// Command sharedfs imitates, on one Linux machine, a shared file system
// as cluster nodes see it: a FUSE mount of a backing directory (the
// "server") whose kernel caches attributes, directory entries and "no
// such file" for a long time (-cache, as NFS's actimeo does), and that
// can inject the faults of such file systems, read from a control file
// (-control) at each call:
//
//	lose=P    of the link and rename calls that succeeded, the fraction P report EIO (a
//	          lost reply), evenly spread: with 0.05 the 1st, the 21st, ...; "LOST CALLS"
//	          of link and rename go to the control file's name with ".lost"
//	estale=P  an open fails with ESTALE with probability P ("STALE OPENS",
//	          the ESTALEs given and the opens, go to the control file's name with ".stale")
//	enospc=1  every create, write and link fails with ENOSPC (a full disk)
//	hang=1    every call blocks until hang=0 (a hung mount)
//
// Several mounts of one backing directory are several nodes, each with
// its own caches. It is a test tool: scripts/sharedfs-local.sh starts and
// stops it; it is not part of nodepack. It needs /dev/fuse and root (or
// fusermount3).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// faults is what the control file asks for now.
type faults struct {
	path         string
	mu           sync.Mutex
	cond         *sync.Cond
	lose, estale float64
	enospc, hang bool
	lost, calls  int // replies lost so far, of the link and rename calls
	stale, opens int // ESTALEs given so far, of the opens
}

func (f *faults) read() {
	b, err := os.ReadFile(f.path)
	if err != nil {
		b = nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose, f.estale, f.enospc, f.hang = 0, 0, false, false
	for _, kv := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(kv, "=")
		x, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "lose":
			f.lose = x
		case "estale":
			f.estale = x
		case "enospc":
			f.enospc = x != 0
		case "hang":
			f.hang = x != 0
		}
	}
	f.cond.Broadcast()
}

// count counts a link or rename call that succeeded, and reports whether
// its reply is lost: the fraction lose of them, evenly spread from the
// first (with 0.05 the 1st, the 21st, ...), so that a test sees losses
// however few calls it makes. "LOST CALLS" go to the
// control file's name with ".lost".
func (f *faults) count() (lost bool) {
	f.mu.Lock()
	f.calls++
	lost = f.lose > 0 && math.Ceil(float64(f.calls)*f.lose) > math.Ceil(float64(f.calls-1)*f.lose)
	if lost {
		f.lost++
	}
	line := fmt.Sprintf("%d %d\n", f.lost, f.calls)
	f.mu.Unlock()
	if f.path != "" {
		os.WriteFile(f.path+".lost", []byte(line), 0o644)
	}
	return lost
}

// staleOpen reports whether an open fails with ESTALE, and counts it in
// the control file's name with ".stale": "STALE OPENS".
func (f *faults) staleOpen() bool {
	f.mu.Lock()
	f.opens++
	stale := f.estale > 0 && rand.Float64() < f.estale
	if stale {
		f.stale++
	}
	line := fmt.Sprintf("%d %d\n", f.stale, f.opens)
	f.mu.Unlock()
	if stale && f.path != "" {
		os.WriteFile(f.path+".stale", []byte(line), 0o644)
	}
	return stale
}

// wait blocks while the mount hangs.
func (f *faults) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.hang {
		f.cond.Wait()
	}
}

func (f *faults) full() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enospc
}

// node is a loopback node with faults.
type node struct {
	fs.LoopbackNode
	f *faults
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.f.wait()
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.f.wait()
	return n.LoopbackNode.Getattr(ctx, fh, out)
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.f.wait()
	return n.LoopbackNode.Readdir(ctx)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.f.wait()
	if n.f.staleOpen() {
		return nil, 0, syscall.ESTALE
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno == 0 {
		fh = &file{fh, n.f}
	}
	return fh, fl, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.f.wait()
	if n.f.full() {
		return nil, nil, 0, syscall.ENOSPC
	}
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno == 0 {
		fh = &file{fh, n.f}
	}
	return in, fh, fl, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.f.wait()
	if n.f.full() {
		return nil, syscall.ENOSPC
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.f.wait()
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.f.wait()
	if n.f.full() {
		return nil, syscall.ENOSPC
	}
	if t, ok := target.(*node); ok {
		target = &t.LoopbackNode
	}
	in, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 && n.f.count() {
		return nil, syscall.EIO // made, its reply lost
	}
	return in, errno
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	n.f.wait()
	if p, ok := newParent.(*node); ok {
		newParent = &p.LoopbackNode
	}
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 && n.f.count() {
		return syscall.EIO // made, its reply lost
	}
	return errno
}

// file is an open file with faults: writes fail on a full disk.
type file struct {
	fs.FileHandle
	f *faults
}

func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.f.wait()
	if h.f.full() {
		return 0, syscall.ENOSPC
	}
	return h.FileHandle.(fs.FileWriter).Write(ctx, data, off)
}

func (h *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.f.wait()
	return h.FileHandle.(fs.FileReader).Read(ctx, dest, off)
}

func (h *file) Flush(ctx context.Context) syscall.Errno {
	return h.FileHandle.(fs.FileFlusher).Flush(ctx)
}

func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.FileHandle.(fs.FileFsyncer).Fsync(ctx, flags)
}

func (h *file) Release(ctx context.Context) syscall.Errno {
	return h.FileHandle.(fs.FileReleaser).Release(ctx)
}

func (h *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.FileHandle.(fs.FileGetattrer).Getattr(ctx, out)
}

func (h *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.FileHandle.(fs.FileLseeker).Lseek(ctx, off, whence)
}

func main() {
	backing := flag.String("backing", "", "the backing directory (the server's)")
	mnt := flag.String("mount", "", "where to mount it (this node's view)")
	cache := flag.Duration("cache", 60*time.Second, "how long the kernel caches attributes, entries and \"no such file\"")
	control := flag.String("control", "", "the control file of faults (see the package doc)")
	flag.Parse()
	if *backing == "" || *mnt == "" {
		fmt.Fprintln(os.Stderr, "sharedfs: -backing and -mount are needed")
		os.Exit(2)
	}
	f := &faults{path: *control}
	f.cond = sync.NewCond(&f.mu)
	if *control != "" {
		f.read()
		go func() {
			for range time.Tick(100 * time.Millisecond) {
				f.read()
			}
		}()
	}
	var st syscall.Stat_t
	if err := syscall.Stat(*backing, &st); err != nil {
		fmt.Fprintln(os.Stderr, "sharedfs:", err)
		os.Exit(1)
	}
	root := &fs.LoopbackRoot{Path: *backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, f: f}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	server, err := fs.Mount(*mnt, root.RootNode, &fs.Options{
		AttrTimeout: cache, EntryTimeout: cache, NegativeTimeout: cache,
		MountOptions: fuse.MountOptions{AllowOther: true, FsName: "sharedfs:" + *backing, Name: "sharedfs", DirectMount: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharedfs: mount:", err)
		os.Exit(1)
	}
	fmt.Printf("sharedfs: %s on %s, caches %v\n", *backing, *mnt, *cache)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		f.mu.Lock()
		f.hang = false
		f.cond.Broadcast()
		f.mu.Unlock()
		server.Unmount()
	}()
	server.Wait()
	f.mu.Lock()
	fmt.Printf("sharedfs: %s unmounted; %d replies lost\n", *mnt, f.lost)
	f.mu.Unlock()
}
