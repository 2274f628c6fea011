package price

import "errors"

// ErrInvalidBook reports a price book that cannot be stored.
var ErrInvalidBook = errors.New("billing: invalid price book")
