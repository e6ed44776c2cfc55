package schedule

// A shared pool (issue 55): the tasks of one submission, each a nodepack
// on its own node, draw their runs from the whole sweep instead of a fixed
// shard, a few at a time, so that a task that starts early or runs short
// runs takes more, and the sweep ends when its work does, not when the
// last task to start ends its share. ClaimSize is how many runs a task
// claims at once; the claims themselves are files in the output
// directory (not here: this package decides, it touches no file).

// maxClaim bounds a claim: at most this many runs are claimed at once.
const maxClaim = 256

// ClaimSize is how many runs a task claims when it has free lanes and no
// run waiting for them: guided self-scheduling (Polychronopoulos and
// Kuck, 1987), a share of the runs left that shrinks as they do, so that
// claims are few while much is left and small at the tail, where runs
// claimed by a task whose lanes are busy would wait while other tasks
// idle. The share is the runs left over twice the tasks, at least what
// fills the free lanes (free, at least 1), at most four runs a lane of
// the task (lanes: a task counts only the tasks that have started, so
// the first to start would otherwise take half the sweep) and maxClaim,
// never more than is left; 0 when nothing is left. tasks counts the
// tasks that may claim, at least 1.
func ClaimSize(left, tasks, free, lanes int) int {
	if left <= 0 {
		return 0
	}
	n := (left + 2*max(tasks, 1) - 1) / (2 * max(tasks, 1))
	return min(max(n, free, 1), max(4*lanes, free, 1), maxClaim, left)
}
