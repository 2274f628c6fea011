package chat_test

import (
	"fmt"

	"github.com/zerolayer/zerolayer/worker/model/chat"
)

func ExampleDetect() {
	// As read from a GGUF file's tokenizer.chat_template.
	src := "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
	tmpl, err := chat.Detect(src)
	if err != nil {
		fmt.Println(err)
		return
	}
	prompt, err := tmpl.Render("Be brief.", []chat.Message{{Role: chat.RoleUser, Content: "Hi!"}}, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tmpl.Name(), tmpl.AddsBOS(), tmpl.StopStrings()[0])
	fmt.Print(prompt)
	// Output:
	// chatml false <|im_end|>
	// <|im_start|>system
	// Be brief.<|im_end|>
	// <|im_start|>user
	// Hi!<|im_end|>
	// <|im_start|>assistant
}

func ExampleTemplate_RenderWith() {
	tmpl, err := chat.Named("qwen3")
	if err != nil {
		fmt.Println(err)
		return
	}
	off := false
	prompt, err := tmpl.RenderWith("Be brief.", []chat.Message{{Role: chat.RoleUser, Content: "Hi!"}},
		chat.RenderOptions{AddGenerationPrompt: true, EnableThinking: &off})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", prompt)
	// Output:
	// "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}

func ExampleSplitReasoning() {
	reasoning, answer := chat.SplitReasoning("<think>\nThe user greets me.\n</think>\n\nHello!")
	fmt.Printf("%q %q\n", reasoning, answer)
	// Output:
	// "The user greets me." "Hello!"
}
