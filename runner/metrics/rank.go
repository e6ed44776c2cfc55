package metrics

import "strings"

// HigherIsBetter says whether a metric named name is better high: names
// of accuracy, AUC, F1, score, reward, precision, recall, BLEU, IoU and
// mAP are; losses, errors, perplexity and the rest are better low.
func HigherIsBetter(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"loss", "err", "perplex", "ppl", "mse", "mae", "rmse", "wer", "cer", "nll", "regret", "cost", "time"} {
		if strings.Contains(n, w) {
			return false
		}
	}
	for _, w := range []string{"acc", "auc", "f1", "score", "reward", "return", "prec", "recall", "bleu", "rouge", "iou", "map", "r2", "success"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// ParseRank reads NAME[:min|max], a metric to rank runs by and whether
// higher is better: with max, yes; with min, no; else as HigherIsBetter
// says of the name. ok is false for another direction.
func ParseRank(spec string) (name string, higher, ok bool) {
	name, dir, colon := strings.Cut(spec, ":")
	switch {
	case dir == "" && colon:
		return name, false, false // "loss:": a direction begun and not given
	case dir == "":
		return name, HigherIsBetter(name), true
	case dir == "min", dir == "max":
		return name, dir == "max", true
	}
	return name, false, false
}
