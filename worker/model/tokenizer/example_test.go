package tokenizer_test

import (
	"fmt"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// tinyVocab is a SentencePiece vocabulary small enough to follow by hand. A
// real one comes from gguf.Open.
func tinyVocab() *gguf.File {
	return &gguf.File{Metadata: map[string]any{
		"tokenizer.ggml.model":      "llama",
		"tokenizer.ggml.tokens":     []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi", "<0x21>", "<0xC3>", "<0xA9>"},
		"tokenizer.ggml.scores":     []float32{0, 0, 0, -1, -2, -2, -3, -4, 0, 0, 0},
		"tokenizer.ggml.token_type": []int32{2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 6},
	}}
}

func Example() {
	tok, err := tokenizer.FromGGUF(tinyVocab())
	if err != nil {
		panic(err)
	}
	// BOS, then "▁hi" twice (merged by score), then "!" as a byte token.
	ids := tok.Encode("hi hi!", tokenizer.EncodeOptions{AddSpecial: true})
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))
	// Output:
	// [1 7 7 8]
	// "hi hi!"
}

func ExampleStreamDecoder() {
	tok, err := tokenizer.FromGGUF(tinyVocab())
	if err != nil {
		panic(err)
	}
	// "é" is the two byte tokens <0xC3> <0xA9>: the first is held back.
	d := tok.NewDecoder()
	for _, id := range tok.Encode("hi é", tokenizer.EncodeOptions{}) {
		fmt.Printf("%-7s -> %q\n", tok.Token(id), d.Add(id))
	}
	fmt.Printf("flush   -> %q\n", d.Flush())
	// Output:
	// ▁hi     -> "hi"
	// ▁       -> " "
	// <0xC3>  -> ""
	// <0xA9>  -> "é"
	// flush   -> ""
}
