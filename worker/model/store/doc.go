// Package store finds model files by path or name and downloads the models
// of a small pinned catalog.
//
// A model is named either by a path to a GGUF file or by a name looked up in
// a list of folders (the command line builds it from ZEROLAYER_MODEL_PATH,
// colon-separated, then ~/.cache/zerolayer/models). A name matches a file
// whose base name, with or without the .gguf extension, equals it ignoring
// case, in one of the folders or in a folder right below one: a models
// folder laid out one folder per model (models/stories260K/stories260K.gguf,
// as in the project's shared test data) is searched by naming the models
// folder. Pull downloads a catalog model over HTTPS, checks its pinned sha256,
// and moves it into place only when the hash matches.
//
// It imports nothing of ours.
package store
