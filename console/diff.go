package console

import "strings"

// diffLine is one line of a line diff: Op is ' ' (in both), '-' (only in
// the old text) or '+' (only in the new one).
type diffLine struct {
	Op   byte
	Text string
}

// Class is the line's CSS class.
func (l diffLine) Class() string {
	switch l.Op {
	case '-':
		return "del"
	case '+':
		return "add"
	}
	return "same"
}

// Sign is the line's mark as a diff writes it.
func (l diffLine) Sign() string { return string(l.Op) }

// maxDiffCells bounds the table the diff fills for the lines between the
// texts' common start and end (a few thousand lines that all changed);
// past it the middle is shown as removed then added, which is still a
// correct diff, only not the shortest.
const maxDiffCells = 1 << 20

// lineDiff is a line diff of a and b: the common first and last lines
// kept as they are, the lines between them matched by a longest common
// subsequence.
func lineDiff(a, b string) []diffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	out := make([]diffLine, 0, len(x)+len(y))
	for _, l := range x[:pre] {
		out = append(out, diffLine{' ', l})
	}
	out = append(out, middle(x[pre:len(x)-suf], y[pre:len(y)-suf])...)
	for _, l := range x[len(x)-suf:] {
		out = append(out, diffLine{' ', l})
	}
	return out
}

// middle diffs the lines that differ, by a longest common subsequence
// (a table of len(x)+1 by len(y)+1, bounded by maxDiffCells).
func middle(x, y []string) []diffLine {
	n, m := len(x), len(y)
	var out []diffLine
	if (n+1)*(m+1) > maxDiffCells {
		for _, l := range x {
			out = append(out, diffLine{'-', l})
		}
		for _, l := range y {
			out = append(out, diffLine{'+', l})
		}
		return out
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	w := m + 1
	lcs := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{' ', x[i]})
			i++
			j++
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			out = append(out, diffLine{'-', x[i]})
			i++
		default:
			out = append(out, diffLine{'+', y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{'-', x[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{'+', y[j]})
	}
	return out
}
