package contracts_test

import (
	"errors"
	"fmt"

	"github.com/zerolayer/zerolayer/contracts"
)

func ExampleDecodeJobRequest() {
	body := []byte(`{
		"model": "stories260K",
		"messages": [{"role": "robot", "content": "Once upon a time"}],
		"temperature": 3,
		"tools": [{"name": "regex_matcher", "params": {"pattern": "a(b"}}]
	}`)
	_, err := contracts.DecodeJobRequest(body, contracts.Limits{})
	var v *contracts.ValidationError
	if errors.As(err, &v) {
		for _, p := range v.Problems {
			fmt.Printf("%s at %s\n", p.Code, p.Field)
		}
	}
	fmt.Println(errors.Is(err, contracts.CodeInvalidRegex), contracts.ErrorFrom(err).HTTPStatus())
	// Output:
	// invalid_request at messages[0].role
	// invalid_sampling at temperature
	// invalid_regex at tools[0].params.pattern
	// true 400
}

func ExampleBuckets_Bucket() {
	b := contracts.DefaultBuckets()
	for _, n := range []int{10, 64, 512, 513} {
		fmt.Println(n, b.Bucket(n))
	}
	fmt.Println(contracts.JobSubject(contracts.PriorityHigh, b.Bucket(100), "acme", "qwen3-0.6b", "job-1"))
	fmt.Println(contracts.ConsumerName(contracts.PriorityHigh, contracts.BucketMedium), contracts.JobsFilter(contracts.PriorityHigh, contracts.BucketMedium))
	// Output:
	// 10 short
	// 64 medium
	// 512 medium
	// 513 long
	// zl.jobs.high.medium.acme.qwen3-0_2E6b.job-1
	// jobs-high-medium zl.jobs.high.medium.*
}

func ExampleParseTraceparent() {
	tp, err := contracts.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		panic(err)
	}
	fmt.Println(tp.TraceIDString(), tp.Sampled())
	child := tp.Child()
	fmt.Println(child.TraceID == tp.TraceID, child.ParentID != tp.ParentID)
	// Output:
	// 4bf92f3577b34da6a3ce929d0e0e4736 true
	// true true
}
