package gateway_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// anthropicClient is the official Anthropic SDK pointed at the gateway as
// key's tenant, without retries (a retried request would hide an error).
func (f *gatewayFixture) anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

// openaiClient is the official OpenAI SDK pointed at the gateway as key's
// tenant, without retries.
func (f *gatewayFixture) openaiClient(key string) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(f.url+"/v1"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
}

// TestSDKs: the official SDKs, as clients would use them, get answers.
func TestSDKs(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()

	ac := f.anthropicClient("key-acme")
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 12,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Once upon a time"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Usage.OutputTokens != 12 || msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Fatalf("anthropic message %+v", msg)
	}

	oc := f.openaiClient("key-acme")
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260k", MaxTokens: openai.Int(12),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" || cc.Usage.CompletionTokens != 12 || cc.Choices[0].FinishReason != "length" {
		t.Fatalf("openai completion %+v", cc)
	}
}
