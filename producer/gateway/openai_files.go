package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// OpenAI's Files API, the part its Batches API needs: a file is an object
// of the batch files bucket named openAIFileName(tenant, id), with its
// filename, purpose and creation time in the object's metadata. A tenant
// only ever names its own files: another tenant's id is not found.

// The purposes of files: batch inputs are uploaded as "batch"; the output
// and error files of batches are written as "batch_output".
const (
	purposeBatch       = "batch"
	purposeBatchOutput = "batch_output"
)

// The metadata keys of a file object.
const (
	fileMetaFilename = "openai-filename"
	fileMetaPurpose  = "openai-purpose"
	fileMetaCreated  = "openai-created-at"
)

// openAIFile is a file as the Files API reports it.
type openAIFile struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at,omitempty"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`

	modTime time.Time // orders a listing
}

// openAIFileName is the object name of tenant's file id.
func openAIFileName(tenant, id string) string { return tenant + "/files/" + id }

// newOpenAIID returns prefix and 24 random lowercase hex digits: an id
// that is also a valid job id.
func newOpenAIID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// validOpenAIID reports whether id could be one of ours with prefix.
func validOpenAIID(id, prefix string) bool {
	return strings.HasPrefix(id, prefix) && len(id) > len(prefix) && contracts.ValidateJobID(id) == nil
}

// fileObject reports the file of object info, or false when the object
// is not a file.
func (g *Gateway) fileObject(info *jetstream.ObjectInfo, id string) (openAIFile, bool) {
	purpose, ok := info.Metadata[fileMetaPurpose]
	if !ok || info.Deleted {
		return openAIFile{}, false
	}
	created := info.ModTime
	if s, err := strconv.ParseInt(info.Metadata[fileMetaCreated], 10, 64); err == nil {
		created = time.Unix(s, 0)
	}
	return openAIFile{ID: id, Object: "file", Bytes: int64(info.Size), CreatedAt: created.Unix(),
		ExpiresAt: created.Add(g.cfg.BatchRetention).Unix(), Filename: info.Metadata[fileMetaFilename],
		Purpose: purpose, Status: "processed", modTime: info.ModTime}, true
}

// fileInfo returns tenant's file id, or a not_found error.
func (g *Gateway) fileInfo(ctx context.Context, tenant, id string) (openAIFile, *contracts.Error) {
	if !validOpenAIID(id, "file-") {
		return openAIFile{}, contracts.NewError(contracts.CodeNotFound, "no file %q", id)
	}
	info, err := g.batches.files.GetInfo(ctx, openAIFileName(tenant, id))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return openAIFile{}, contracts.NewError(contracts.CodeNotFound, "no file %s", id)
	}
	if err != nil {
		return openAIFile{}, asError(err)
	}
	f, ok := g.fileObject(info, id)
	if !ok {
		return openAIFile{}, contracts.NewError(contracts.CodeNotFound, "no file %s", id)
	}
	return f, nil
}

// putFile stores the content of r as tenant's file id.
func (g *Gateway) putFile(ctx context.Context, tenant, id, filename, purpose string, r io.Reader) (openAIFile, error) {
	now := time.Now()
	info, err := g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: openAIFileName(tenant, id), Metadata: map[string]string{
		fileMetaFilename: filename, fileMetaPurpose: purpose, fileMetaCreated: strconv.FormatInt(now.Unix(), 10)}}, r)
	if err != nil {
		return openAIFile{}, err
	}
	f, _ := g.fileObject(info, id)
	return f, nil
}

// uploadFile: POST /v1/files, multipart/form-data with the parts file
// and purpose (only "batch"); the file is at most Config.MaxBatchBytes.
func (g *Gateway) uploadFile(w http.ResponseWriter, r *http.Request) {
	tenant, e := g.authenticate(r)
	if e != nil {
		openAIError(w, e)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		openAIError(w, contracts.NewError(contracts.CodeInvalidRequest, "a file is uploaded as multipart/form-data with the parts file and purpose"))
		return
	}
	// The form's other parts are small: a little room beyond the file.
	r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBatchBytes+64<<10)
	mr, err := r.MultipartReader()
	if err != nil {
		openAIError(w, contracts.NewError(contracts.CodeInvalidRequest, "reading the form: %v", err))
		return
	}
	tooLarge := contracts.NewError(contracts.CodeRequestTooLarge, "the file is larger than %d bytes", g.cfg.MaxBatchBytes)
	var (
		spool      *os.File
		filename   string
		purpose    string
		gotPurpose bool
		formError  *contracts.Error
		readPart   = func(p io.Reader, max int64) ([]byte, bool) {
			b, err := io.ReadAll(io.LimitReader(p, max+1))
			return b, err == nil && int64(len(b)) <= max
		}
	)
	defer func() {
		if spool != nil {
			spool.Close()
		}
	}()
	for formError == nil {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			formError = tooLarge
			break
		}
		if err != nil {
			formError = contracts.NewError(contracts.CodeInvalidRequest, "reading the form: %v", err)
			break
		}
		switch part.FormName() {
		case "file":
			if spool != nil {
				formError = contracts.NewError(contracts.CodeInvalidRequest, "the form has more than one file part")
				break
			}
			if spool, err = tempFile(); err != nil {
				formError = asError(err)
				break
			}
			filename = part.FileName()
			n, err := io.Copy(spool, io.LimitReader(part, g.cfg.MaxBatchBytes+1))
			switch {
			case errors.As(err, &mb) || n > g.cfg.MaxBatchBytes:
				formError = tooLarge
			case err != nil:
				formError = contracts.NewError(contracts.CodeInvalidRequest, "reading the file: %v", err)
			}
		case "purpose":
			b, ok := readPart(part, 256)
			if !ok {
				formError = contracts.NewError(contracts.CodeInvalidRequest, "purpose: want a short string such as %q", purposeBatch)
			}
			purpose, gotPurpose = strings.TrimSpace(string(b)), true
		}
		part.Close()
	}
	switch {
	case formError != nil:
	case spool == nil:
		formError = contracts.NewError(contracts.CodeInvalidRequest, "the form has no file part")
	case !gotPurpose:
		formError = contracts.NewError(contracts.CodeInvalidRequest, "the form has no purpose part; files here are for batches: purpose %q", purposeBatch)
	case purpose != purposeBatch:
		formError = contracts.NewError(contracts.CodeInvalidRequest, "purpose %q is not supported; this gateway keeps files for batches only: purpose %q", purpose, purposeBatch)
	}
	if formError != nil {
		openAIError(w, formError)
		return
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		openAIError(w, asError(err))
		return
	}
	if filename == "" {
		filename = "upload.jsonl"
	}
	f, err := g.putFile(r.Context(), tenant, newOpenAIID("file-"), filename, purpose, spool)
	if err != nil {
		openAIError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// fileCall authenticates a call on /v1/files/{id} and finds the file; on
// failure it has answered.
func (g *Gateway) fileCall(w http.ResponseWriter, r *http.Request) (string, openAIFile, bool) {
	tenant, e := g.authenticate(r)
	if e != nil {
		openAIError(w, e)
		return "", openAIFile{}, false
	}
	f, e := g.fileInfo(r.Context(), tenant, r.PathValue("id"))
	if e != nil {
		openAIError(w, e)
		return "", openAIFile{}, false
	}
	return tenant, f, true
}

// getFile: GET /v1/files/{id}.
func (g *Gateway) getFile(w http.ResponseWriter, r *http.Request) {
	if _, f, ok := g.fileCall(w, r); ok {
		writeJSON(w, http.StatusOK, f)
	}
}

// fileContent: GET /v1/files/{id}/content: the file's bytes, whole or
// visibly not (serveObject: Content-Length and Repr-Digest, a failed read
// aborts the response).
func (g *Gateway) fileContent(w http.ResponseWriter, r *http.Request) {
	tenant, f, ok := g.fileCall(w, r)
	if !ok {
		return
	}
	g.serveObject(w, r, openAIFileName(tenant, f.ID), "application/octet-stream", openAIError)
}

// deleteFile: DELETE /v1/files/{id}. A batch made from the file is not
// touched: it keeps its own copy of the requests.
func (g *Gateway) deleteFile(w http.ResponseWriter, r *http.Request) {
	tenant, f, ok := g.fileCall(w, r)
	if !ok {
		return
	}
	err := g.batches.files.Delete(r.Context(), openAIFileName(tenant, f.ID))
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		openAIError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": f.ID, "object": "file", "deleted": true})
}

// listFiles: GET /v1/files with purpose, limit (1 to 10,000, default
// 10,000), order (desc, the default, or asc by creation) and after (a file
// id: the files after it in that order).
func (g *Gateway) listFiles(w http.ResponseWriter, r *http.Request) {
	tenant, e := g.authenticate(r)
	if e != nil {
		openAIError(w, e)
		return
	}
	q := r.URL.Query()
	limit, e := listLimit(q.Get("limit"), 10000, 10000)
	if e != nil {
		openAIError(w, e)
		return
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		openAIError(w, contracts.NewError(contracts.CodeInvalidRequest, "order %q: want asc or desc", order))
		return
	}
	infos, err := g.batches.files.List(r.Context())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		openAIError(w, asError(err))
		return
	}
	prefix := openAIFileName(tenant, "")
	var files []openAIFile
	for _, info := range infos {
		id, ok := strings.CutPrefix(info.Name, prefix)
		if !ok {
			continue
		}
		if f, ok := g.fileObject(info, id); ok && (q.Get("purpose") == "" || f.Purpose == q.Get("purpose")) {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(a, b openAIFile) int {
		if c := a.modTime.Compare(b.modTime); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if order != "asc" {
		slices.Reverse(files)
	}
	writeJSON(w, http.StatusOK, listPage(files, q.Get("after"), limit, func(f openAIFile) string { return f.ID }))
}

// listLimit reads a list's limit parameter: 1 to max, def when absent.
func listLimit(v string, def, max int) (int, *contracts.Error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, contracts.NewError(contracts.CodeInvalidRequest, "limit %q: want 1 to %d", v, max)
	}
	return n, nil
}

// listPage is OpenAI's list object for the items after the one with id
// after (all when after is empty or unknown), at most limit of them.
func listPage[T any](items []T, after string, limit int, id func(T) string) map[string]any {
	if after != "" {
		if i := slices.IndexFunc(items, func(it T) bool { return id(it) == after }); i >= 0 {
			items = items[i+1:]
		}
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	page := map[string]any{"object": "list", "data": items, "has_more": more, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		page["first_id"], page["last_id"] = id(items[0]), id(items[len(items)-1])
	} else {
		page["data"] = []T{}
	}
	return page
}
