package sample_test

import (
	"fmt"

	"github.com/zerolayer/zerolayer/worker/sample"
)

func ExampleSampler_Sample() {
	s, err := sample.New(sample.Params{}) // temperature 0: greedy
	if err != nil {
		fmt.Println(err)
		return
	}
	c := s.Sample([]float32{0.5, 2, 2, -1}, nil, 2)
	fmt.Printf("id %d, p %.3f\n", c.ID, c.Prob)
	for _, t := range c.Top {
		fmt.Printf("  %d %.3f\n", t.ID, t.Logprob)
	}
	// Output:
	// id 1, p 0.440
	//   1 -0.821
	//   2 -0.821
}

func ExampleStopMatcher() {
	m := sample.NewStopMatcher([]string{"<|im_end|>"})
	for _, piece := range []string{"Sure", "! <|im", "_end|>", "ignored"} {
		text, stopped := m.Push(piece)
		fmt.Printf("%q %v\n", text, stopped)
	}
	// Output:
	// "Sure" false
	// "! " false
	// "" true
	// "" true
}

func ExamplePreset() {
	p, maxTokens, err := sample.Preset("balanced")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Temperature, p.TopK, p.TopP, maxTokens)
	// Output: 0.7 40 0.9 512
}
