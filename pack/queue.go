package pack

import (
	"errors"
	"fmt"
	"time"
)

// Queue holds runs waiting to start, in input order, and decides which may
// start next on an Allocator: the first one that fits. A run that does not
// fit yet lets smaller runs behind it start (backfill), but not for ever:
// once runs have been starting ahead of it for maxWait, it reserves what
// it waits for — the GPUs closest to free, as close together as it needs
// them, and as many CPUs and as much memory as it asks for — and runs
// behind it start only on what is left, so that what it waits for frees
// up and stays free until it fits. Runs therefore start in input order,
// except for the backfill, and none waits unboundedly while others pass
// it.
//
// Queue is pure: the caller tells it the time. It is not safe for
// concurrent use; the Allocator under it is, so runs may be released
// from other goroutines between calls.
type Queue[T any] struct {
	a       *Allocator
	maxWait time.Duration
	waiting []waiting[T]
}

type waiting[T any] struct {
	item     T
	req      Request
	passed   time.Time // when a run behind it first started ahead of it; zero if none has
	reserved []int     // once it holds the queue: the GPUs it waits for (Allocator units)
}

// NewQueue returns an empty queue that allocates from a. A zero maxWait
// starts runs strictly in input order. With a nil Allocator nothing is
// placed: every run starts in order, with an Assignment that holds its
// Request only.
func NewQueue[T any](a *Allocator, maxWait time.Duration) *Queue[T] {
	return &Queue[T]{a: a, maxWait: maxWait}
}

// Push adds a run that asks for r at the end of the queue.
func (q *Queue[T]) Push(item T, r Request) {
	q.waiting = append(q.waiting, waiting[T]{item: item, req: r})
}

// PushFront adds a run that asks for r at the head of the queue: a run
// retried with another request goes before the runs that have not started
// at all.
func (q *Queue[T]) PushFront(item T, r Request) {
	q.waiting = append(q.waiting, waiting[T]{})
	copy(q.waiting[1:], q.waiting)
	q.waiting[0] = waiting[T]{item: item, req: r}
}

// Len returns the number of waiting runs.
func (q *Queue[T]) Len() int { return len(q.waiting) }

// Reserved reports whether the first waiting run has been passed for
// maxWait at now, so that nothing behind it starts until it does.
func (q *Queue[T]) Reserved(now time.Time) bool {
	if len(q.waiting) == 0 {
		return false
	}
	passed := q.waiting[0].passed
	return q.maxWait == 0 || !passed.IsZero() && now.Sub(passed) >= q.maxWait
}

// Next takes the first waiting run that may start now out of the queue and
// allocates its Assignment. It returns an error wrapping [ErrBusy] when no
// run may start now, and leaves the queue as it was. A run whose request
// can never fit, or is invalid, is taken out and returned with that error
// and no Assignment: the caller reports it (checking requests with
// [Allocator.Check] before they are queued avoids it).
func (q *Queue[T]) Next(now time.Time) (T, Assignment, error) {
	var zero T
	failed := map[Request]bool{} // requests that did not fit in this call
	var first *Request           // the reserved run's request, once it did not fit
	for i := range q.waiting {
		w := &q.waiting[i]
		if failed[w.req] {
			continue
		}
		as, err := Assignment{Request: w.req}, error(nil)
		switch {
		case q.a == nil:
		case first != nil:
			as, err = q.a.allocateBehind(*first, q.waiting[0].reserved, w.req)
		default:
			as, err = q.a.Allocate(w.req)
		}
		switch {
		case err == nil:
			for j := range i {
				if q.waiting[j].passed.IsZero() {
					q.waiting[j].passed = now
				}
			}
			item := w.item
			q.remove(i)
			return item, as, nil
		case !errors.Is(err, ErrBusy):
			item := w.item
			q.remove(i)
			return item, Assignment{}, err
		}
		failed[w.req] = true
		if i == 0 && q.Reserved(now) {
			if q.maxWait == 0 || q.a == nil {
				break // strictly in order
			}
			first = &q.waiting[0].req
			if q.waiting[0].reserved == nil {
				q.waiting[0].reserved = q.a.reserveUnits(*first)
			}
		}
	}
	return zero, Assignment{}, fmt.Errorf("%d waiting: %w", len(q.waiting), ErrBusy)
}

func (q *Queue[T]) remove(i int) {
	copy(q.waiting[i:], q.waiting[i+1:])
	var zero waiting[T]
	q.waiting[len(q.waiting)-1] = zero
	q.waiting = q.waiting[:len(q.waiting)-1]
}

// Update replaces the request of every waiting run by what f returns for
// it, so a caller that has learnt what runs need (by measuring one)
// re-resolves those still waiting.
func (q *Queue[T]) Update(f func(item T, r Request) Request) {
	for i := range q.waiting {
		w := &q.waiting[i]
		if r := f(w.item, w.req); r != w.req {
			w.req, w.reserved = r, nil
		}
	}
}
