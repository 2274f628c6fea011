// Package toolstest holds what the tests of the tools package and of its
// internal rooms share: the shared test data folder and the llama
// tokenizer in it, the JSON-Schema-Test-Suite files, and a regex search
// through the lazy DFA. It is imported only from _test.go files.
//
// # Data flow
//
// SharedDir finds ../shared (or skips the test); LlamaVocab loads the
// 32k-token llama2-tiny-random tokenizer from it once per process.
// SuiteDir, SuiteFiles, ReadSuiteFile and RemotesLoader read the draft 2020-12 suite.
// RegexSearch compiles a pattern with automaton and runs it over an input
// under explicit limits, the way regex_matcher does.
//
// # Imports
//
// The standard library, santhosh-tekuri/jsonschema, the GGUF reader and
// tokenizer, limit and automaton. Nothing imports it but tests.
//
//	tok := toolstest.LlamaVocab(t) // skips without ../shared
//	for _, file := range toolstest.SuiteFiles(t, "") {
//		for _, g := range toolstest.ReadSuiteFile(t, file) { ... }
//	}
package toolstest
