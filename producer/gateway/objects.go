package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// Reading the batch files whole.
//
// The object store's reader (nats.go's jetstream.ObjectResult) hands an
// object over chunk by chunk as they arrive and checks its SHA-256 only at
// its end (jetstream.ErrDigestMismatch). A read that stalls (the server
// stopped sending: a flow-control reply the connection may not publish, a
// server restarting) fails with nats.ErrTimeout once its context's
// deadline passes, and without a deadline that is JetStream's default of 5
// seconds for the whole object. What the reader gave before it failed is
// a part of the object, which a caller that ignores the error takes for
// all of it: a download answered 200 with 2 MiB of a larger file.
//
// So every read of a batch file goes through copyObject, which delivers
// the object whole or fails: a read that fails part-way is read again
// from the start, skipping what was already delivered, and what was
// delivered is checked against the object's size and digest before its
// last byte goes out. A download (serveObject) that fails after its first
// byte aborts its response, so that the client's read of the body fails.

// objectReadSpan is the size a read of a batch file is given
// Config.ObjectReadTimeout for: a larger file as much again per span.
const objectReadSpan = 32 << 20

// objectReadTries is how many reads of an object in a row may fail
// without delivering a byte more than the last before copyObject gives up.
const objectReadTries = 3

// The waits between the reads of an object that failed.
const (
	objectRetryMinWait = 100 * time.Millisecond
	objectRetryMaxWait = 2 * time.Second
)

// retryableRead reports whether a read of an object that failed with err
// may succeed if tried again: a read that timed out or stalled, lost
// chunks, or found NATS out of reach for a moment.
func retryableRead(err error) bool {
	var we *objectWriteError
	switch {
	case errors.As(err, &we), errors.Is(err, errObjectChanged), errors.Is(err, nats.ErrConnectionClosed):
		return false
	}
	// The reader's own deadline passing reads as nats.ErrTimeout, or as
	// its pipe's timeout ("read pipe: i/o timeout") when the deadline's
	// context has not noticed yet.
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout() || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrDigestMismatch) || errors.Is(err, errObjectShort) || contracts.IsUnreachable(err)
}

// objectReadTimeout bounds one read of an object of size bytes.
func (g *Gateway) objectReadTimeout(size uint64) time.Duration {
	return g.cfg.ObjectReadTimeout * time.Duration(1+size/objectReadSpan)
}

// copyObject copies batch file name whole to w and returns its info. head,
// if set, is called once with the info before anything is written (a
// download sets its headers from it). A read that fails for a passing
// reason (retryableRead) is read again from the object's start, skipping
// the bytes already written, as long as reads deliver more (at most
// objectReadTries in a row that do not). The last byte is written only
// once every byte has been checked against the object's size and SHA-256
// digest: on any failure w has less than the whole object. The info
// returned is nil when the object could not be read at all.
func (g *Gateway) copyObject(ctx context.Context, name string, w io.Writer, head func(*jetstream.ObjectInfo)) (*jetstream.ObjectInfo, error) {
	c := &objectCopy{w: w, sum: sha256.New()}
	fails, wait := 0, objectRetryMinWait
	for {
		before := c.done
		err := g.readObject(ctx, name, c, head)
		if err == nil {
			return c.info, c.finish()
		}
		err = fmt.Errorf("gateway: reading %s: %w", name, err)
		if ctx.Err() != nil || !retryableRead(err) {
			return c.info, err
		}
		if c.done > before {
			fails, wait = 0, objectRetryMinWait
		} else if fails++; fails == objectReadTries {
			return c.info, err
		}
		g.cfg.Logger.Warn("gateway: a read of a batch file failed part-way; reading it again", "file", name, "delivered", c.done, "err", err)
		select {
		case <-ctx.Done():
			return c.info, err
		case <-time.After(wait):
		}
		wait = min(2*wait, objectRetryMaxWait)
	}
}

// readObject reads object name once, from its start, into c: the bytes c
// has not taken yet. The first read sets c.info (and calls head); a later
// one fails with errObjectChanged if the object is not the same.
func (g *Gateway) readObject(ctx context.Context, name string, c *objectCopy, head func(*jetstream.ObjectInfo)) error {
	size := uint64(0)
	if c.info != nil {
		size = c.info.Size
	} else {
		info, err := g.batches.files.GetInfo(ctx, name)
		if err != nil {
			return err
		}
		size = info.Size
	}
	// The reader's deadline: without one, JetStream's default (5 s) would
	// bound the whole object.
	rctx, cancel := context.WithTimeout(ctx, g.objectReadTimeout(size))
	defer cancel()
	obj, err := g.batches.files.Get(rctx, name)
	if err != nil {
		return err
	}
	defer obj.Close()
	info, err := obj.Info()
	if err != nil {
		return err
	}
	switch {
	case c.info == nil:
		c.info = info
		if head != nil {
			head(info)
		}
	case info.Size != c.info.Size || info.Digest != c.info.Digest:
		return errObjectChanged
	}
	if _, err := io.CopyN(io.Discard, obj, c.done); err != nil {
		if err == io.EOF {
			err = errObjectShort
		}
		return err
	}
	if _, err := io.Copy(c, obj); err != nil {
		return err
	}
	if uint64(c.done) != c.info.Size {
		return errObjectShort
	}
	return nil
}

// objectCopy is what copyObject has taken of an object: how many bytes,
// their hash, and the last byte, held back until the whole is checked.
type objectCopy struct {
	w    io.Writer
	info *jetstream.ObjectInfo
	done int64 // the bytes taken: written to w, and the last one held
	sum  hash.Hash
	last []byte
}

// Write writes p to w, holding back the object's last byte. A write error
// is an *objectWriteError.
func (c *objectCopy) Write(p []byte) (int, error) {
	if int64(len(p)) > int64(c.info.Size)-c.done {
		return 0, errObjectCorrupt // more bytes than the object has
	}
	out := p
	if c.done+int64(len(p)) == int64(c.info.Size) && len(p) > 0 {
		out, c.last = p[:len(p)-1], p[len(p)-1:]
	}
	n, err := c.w.Write(out)
	c.sum.Write(out[:n])
	c.done += int64(n)
	if err != nil {
		c.last = nil
		return n, &objectWriteError{err}
	}
	if c.last != nil {
		c.sum.Write(c.last)
		c.done++
	}
	return len(p), nil
}

// finish checks what was taken against the object's size and digest and,
// if it is the object, writes the last byte.
func (c *objectCopy) finish() error {
	want, err := jetstream.DecodeObjectDigest(c.info.Digest)
	if err != nil {
		return err
	}
	if uint64(c.done) != c.info.Size || !bytes.Equal(c.sum.Sum(nil), want) {
		return fmt.Errorf("gateway: reading %s: %w", c.info.Name, errObjectCorrupt)
	}
	if len(c.last) > 0 {
		if _, err := c.w.Write(c.last); err != nil {
			return &objectWriteError{err}
		}
	}
	return nil
}

// spoolObject copies batch file name whole (copyObject) to a temporary
// file, removed when closed, and returns it at its start.
func (g *Gateway) spoolObject(ctx context.Context, name string) (*os.File, error) {
	f, err := tempFile()
	if err != nil {
		return nil, err
	}
	if _, err := g.copyObject(ctx, name, f, nil); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("gateway: spooling %s: %w", name, err)
	}
	return f, nil
}

// serveObject answers batch file name whole: its size as Content-Length,
// its SHA-256 digest as Repr-Digest (RFC 9530) and as the ETag, and its
// bytes (copyObject). An object that cannot be read before its first byte
// is sent is answered with fail's error; one whose read fails after that
// aborts the response (http.ErrAbortHandler): the connection is closed
// short of Content-Length, so the client's read of the body fails (Go's:
// io.ErrUnexpectedEOF) instead of ending as if the file were whole.
func (g *Gateway) serveObject(w http.ResponseWriter, r *http.Request, name, contentType string, fail func(http.ResponseWriter, *contracts.Error)) {
	head := func(info *jetstream.ObjectInfo) {
		sum, _ := jetstream.DecodeObjectDigest(info.Digest) // (none: no digest header)
		setBodyHeaders(w.Header(), contentType, int64(info.Size), sum)
	}
	if r.Method == http.MethodHead {
		info, err := g.batches.files.GetInfo(r.Context(), name)
		if err != nil {
			fail(w, asError(err))
			return
		}
		head(info)
		return
	}
	sent := false
	_, err := g.copyObject(r.Context(), name, writeTracker{w, &sent}, head)
	switch {
	case err == nil:
	case !sent:
		// Nothing has gone out: a proper error answer still can.
		for _, k := range []string{"Content-Type", "Content-Length", "Repr-Digest", "Etag"} {
			w.Header().Del(k)
		}
		fail(w, asError(err))
	default:
		if r.Context().Err() == nil {
			g.cfg.Logger.Warn("gateway: a download failed part-way; aborting its response", "file", name, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// setBodyHeaders sets the headers that let a client check a body of size
// bytes whose SHA-256 is sum: Content-Length, Repr-Digest (RFC 9530) and a
// strong ETag (the last two only with a sum).
func setBodyHeaders(h http.Header, contentType string, size int64, sum []byte) {
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	if len(sum) > 0 {
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
		h.Set("Etag", `"sha256-`+base64.RawURLEncoding.EncodeToString(sum)+`"`)
	}
}

// writeTracker is a writer that notes when anything was written.
type writeTracker struct {
	w    io.Writer
	sent *bool
}

func (t writeTracker) Write(p []byte) (int, error) {
	if len(p) > 0 {
		*t.sent = true
	}
	return t.w.Write(p)
}

// serveFile answers the size bytes of f, whose SHA-256 is sum, as
// serveObject answers an object: with Content-Length and the digest, and a
// read that fails or ends short aborts the response.
func (g *Gateway) serveFile(w http.ResponseWriter, r *http.Request, f *os.File, size int64, sum []byte, contentType string) {
	setBodyHeaders(w.Header(), contentType, size, sum)
	if r.Method == http.MethodHead {
		return
	}
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if r.Context().Err() == nil {
			g.cfg.Logger.Warn("gateway: a download failed part-way; aborting its response", "file", f.Name(), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}
