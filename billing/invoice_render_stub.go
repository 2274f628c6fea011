package billing

import (
	"fmt"
	"io"
)

// Temporary until the renderer lands.
const FormatPDF Format = "pdf"

func ParseInvoiceFormat(s string) (Format, error) {
	switch Format(s) {
	case FormatHTML, FormatPDF, FormatCSV, FormatJSON:
		return Format(s), nil
	}
	return "", fmt.Errorf("%w %q", ErrInvalidFormat, s)
}

func (inv *Invoice) Write(w io.Writer, f Format) error {
	if f == FormatJSON {
		return writeIndentedJSON(w, inv)
	}
	return fmt.Errorf("not yet")
}
