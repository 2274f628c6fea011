// Package sample picks the next token from a model's logits and watches the
// generated text for stop sequences.
//
// A Sampler is built once per generation from Params and called once per
// step. Each call runs, in this order:
//
//  1. repetition penalty over the last RepeatLastN history tokens (llama.cpp
//     semantics: positive logits divided, negative ones multiplied);
//  2. with Temperature 0, the arg max, ties going to the lowest token id;
//  3. otherwise temperature scaling, then top-k, top-p and min-p truncation
//     (each on the distribution the previous step left), then a draw from
//     the survivors with the Sampler's PCG generator seeded from Params.Seed.
//
// The log-probabilities a Choice reports (of the chosen token and of the top
// alternatives) are the log-softmax of the logits after the repetition
// penalty and before temperature and truncation: they describe what the
// model predicted, not the sampling settings, and they stay comparable
// between requests with different settings.
//
// A step costs O(V) for a vocabulary of V tokens (a copy and one or two
// exponentials per logit), plus O(V log k) for top-k and top-logprob
// selection, which use a bounded heap rather than a full sort. Top-p without
// top-k grows a sorted prefix in rounds until it holds the nucleus, which is
// usually small. After the first call a Sampler reuses its buffers, so the
// steps allocate nothing unless top log-probabilities are asked for.
//
// StopMatcher sits between the detokenizer and the client: it passes text
// through, holds back a tail that might be the start of a stop sequence, and
// cuts the text where a stop sequence completes.
//
// # Presets
//
// Preset returns a named set of parameters and a suggested max_tokens:
//
//	name      temperature  top_k  top_p  min_p  repetition_penalty  repeat_last_n  max_tokens
//	concise   0.3          40     0.9    0.05   1.1                 64             256
//	balanced  0.7          40     0.9    0.05   1.1                 64             512
//	detailed  0.6          40     0.95   0.05   1.05                128            1536
//	creative  1.0          100    0.95   0.02   1.15                256            1024
//
// # Example
//
//	s, err := sample.New(sample.Params{Temperature: 0.7, TopP: 0.9, Seed: 42})
//	if err != nil {
//		return err
//	}
//	stop := sample.NewStopMatcher(tmpl.StopStrings())
//	for {
//		c := s.Sample(logits, history, 0)
//		history = append(history, c.ID)
//		text, done := stop.Push(detok(c.ID))
//		send(text)
//		if done {
//			break
//		}
//	}
//
// It imports nothing of ours.
package sample
