package workloads

import (
	"slices"
	"testing"
)

func TestRoundOrderPutsEachVariantInEachPlace(t *testing.T) {
	for n := 1; n <= 5; n++ {
		// placed[v][k]: the rounds in which variant v ran k-th.
		placed := make([][]int, n)
		for v := range placed {
			placed[v] = make([]int, n)
		}
		every := make([]int, n)
		for v := range every {
			every[v] = v
		}
		for r := range n {
			order := roundOrder(n, r)
			if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, every) {
				t.Fatalf("n=%d round %d: %v does not run every variant once", n, r, order)
			}
			for k, v := range order {
				placed[v][k]++
			}
		}
		for v := range placed {
			for k, times := range placed[v] {
				if times != 1 {
					t.Errorf("n=%d: variant %d ran in place %d in %d of %d rounds, not 1", n, v, k, times, n)
				}
			}
		}
	}
	if got := roundOrder(2, 1); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("two variants, second round: %v, want them alternated", got)
	}
	if got := roundOrder(3, 0); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("first round: %v, want the list's order", got)
	}
}
