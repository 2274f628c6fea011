package tools_test

import (
	"encoding/json"
	"fmt"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// byteVocab is a toy vocabulary: token 0 ends generation, token 1+b is the
// byte b. A real one is a *tokenizer.Tokenizer.
type byteVocab struct{}

func (byteVocab) VocabSize() int { return 257 }
func (byteVocab) Piece(id int32) []byte {
	if id == 0 {
		return []byte("</s>")
	}
	return []byte{byte(id - 1)}
}
func (byteVocab) IsEOG(id int32) bool { return id == 0 }

func allowed(mask []uint64, id int32) bool { return mask[id/64]&(1<<(id%64)) != 0 }

func Example() {
	schema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`)
	set, err := tools.Compile(nil, &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: schema}, byteVocab{}, tools.Budget{})
	if err != nil {
		panic(err)
	}
	run := set.NewRun()
	mask := make([]uint64, (257+63)/64)
	for _, c := range []byte(`{"ok":tr`) {
		run.Mask(mask)
		if !allowed(mask, int32(c)+1) {
			panic("masked")
		}
		run.Accept(int32(c) + 1)
	}
	run.Mask(mask)
	fmt.Println("after {\"ok\":tr  'u' allowed:", allowed(mask, 'u'+1), " 'x' allowed:", allowed(mask, 'x'+1))
	for _, c := range []byte(`ue}`) {
		run.Accept(int32(c) + 1)
	}
	fmt.Println("complete:", run.Complete())
	_, err = run.Finish()
	fmt.Println("valid:", err == nil)
	// Output:
	// after {"ok":tr  'u' allowed: true  'x' allowed: false
	// complete: true
	// valid: true
}

func ExampleRun_Text() {
	set, _ := tools.Compile([]contracts.Tool{
		{Name: contracts.ToolPIIRedactor},
		{Name: contracts.ToolSuffix, Params: map[string]json.RawMessage{"text": json.RawMessage(`" [bot]"`)}},
	}, nil, byteVocab{}, tools.Budget{})
	run := set.NewRun()
	var out string
	for _, chunk := range []string{"write to jo", "hn@examp", "le.com or call 555-123-4567"} {
		s, _ := run.Text(chunk)
		out += s
	}
	tail, _ := run.Finish()
	fmt.Println(out + tail)
	// Output:
	// write to [EMAIL] or call [PHONE] [bot]
}
