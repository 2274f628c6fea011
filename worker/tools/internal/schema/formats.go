package schema

import "strings"

// Patterns for the string formats json_validator enforces. Each accepts a
// subset of what santhosh-tekuri/jsonschema's format check accepts (which
// follows the RFCs), so that constrained output always passes a validator
// that asserts formats; the subsets drop rarely generated corners (leap
// seconds, IPv6 with an embedded IPv4 address, quoted e-mail local parts,
// URIs with characters outside the unreserved set). Every pattern is
// matched against the whole decoded string.

const (
	reYear = `\d{4}`
	reLeap = `(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)`
	reDate = `(?:` + reYear + `-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)|` + reLeap + `-02-29)`
	reTime = `(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)`
	// A label of 1 to 62 characters, no hyphen at either end, and no "--"
	// in the third and fourth places (reserved for Punycode, which is not
	// checked here).
	reLabel = `(?:[A-Za-z0-9]|[A-Za-z0-9]{2}|[A-Za-z0-9][A-Za-z0-9-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]{2}[A-Za-z0-9]` +
		`|[A-Za-z0-9][A-Za-z0-9-](?:[A-Za-z0-9][A-Za-z0-9-]|-[A-Za-z0-9])[A-Za-z0-9-]{0,57}[A-Za-z0-9])`
	reHost  = reLabel + `(?:\.` + reLabel + `){0,3}`
	reLocal = `[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-](?:\.?[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]){0,31}`
	reOct   = `(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`
	reH16   = `[0-9A-Fa-f]{1,4}`
	rePChar = `(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})`
)

var reIPv6 = strings.Join([]string{
	`(?:` + reH16 + `:){7}` + reH16,
	`(?:` + reH16 + `:){1,7}:`,
	`(?:` + reH16 + `:){1,6}:` + reH16,
	`(?:` + reH16 + `:){1,5}(?::` + reH16 + `){1,2}`,
	`(?:` + reH16 + `:){1,4}(?::` + reH16 + `){1,3}`,
	`(?:` + reH16 + `:){1,3}(?::` + reH16 + `){1,4}`,
	`(?:` + reH16 + `:){1,2}(?::` + reH16 + `){1,5}`,
	reH16 + `:(?::` + reH16 + `){1,6}`,
	`:(?:(?::` + reH16 + `){1,7}|:)`,
}, "|")

// reRelRef is a relative reference (a subset: path, query, fragment).
const reRelRef = `(?:(?:[A-Za-z0-9._~!$&'()*+,;=@-]|%[0-9A-Fa-f]{2})+(?:/` + rePChar + `*)*|/(?:` + rePChar + `+(?:/` + rePChar + `*)*)?)?` +
	`(?:\?(?:` + rePChar + `|[/?])*)?(?:#(?:` + rePChar + `|[/?])*)?`

// reDuration is an RFC 3339 duration (appendix A): units in order, none
// skipped between the first and the last.
const reDuration = `P(?:\d+W|(?:\d+D|\d+M(?:\d+D)?|\d+Y(?:\d+M(?:\d+D)?)?)(?:T` + reDurTime + `)?|T` + reDurTime + `)`
const reDurTime = `(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)`

// FormatPatterns maps a format name to its pattern.
var FormatPatterns = map[string]string{
	"date":      reDate,
	"time":      reTime,
	"date-time": reDate + `[Tt]` + reTime,
	"email":     reLocal + `@` + reLabel + `(?:\.` + reLabel + `){0,2}`,
	"hostname":  reHost,
	"ipv4":      reOct + `(?:\.` + reOct + `){3}`,
	"ipv6":      `(?:` + reIPv6 + `)`,
	"uuid":      `[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`,
	"uri": `[A-Za-z][A-Za-z0-9+.-]*:(?://[A-Za-z0-9.-]*(?::\d{1,5})?(?:/` + rePChar + `*)*|` + rePChar + `+(?:/` + rePChar + `*)*)?` +
		`(?:\?(?:` + rePChar + `|[/?])*)?(?:#(?:` + rePChar + `|[/?])*)?`,
	"json-pointer": `(?:/(?:[^/~]|~[01])*)*`,
	"duration":     reDuration,
}

func init() {
	FormatPatterns["iri"] = FormatPatterns["uri"]
	FormatPatterns["uri-reference"] = `(?:` + FormatPatterns["uri"] + `|` + reRelRef + `)`
	FormatPatterns["iri-reference"] = FormatPatterns["uri-reference"]
}

// contentPatterns are the contentEncoding values a draft 4-7 validator
// asserts.
var contentPatterns = map[string]string{
	"base64": `(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?`,
}

// assertedFormats are the formats santhosh-tekuri/jsonschema checks for
// drafts 4-7 (where format is an assertion).
var assertedFormats = map[string]bool{
	"json-pointer": true, "relative-json-pointer": true, "uuid": true, "duration": true,
	"period": true, "ipv4": true, "ipv6": true, "hostname": true, "email": true,
	"date": true, "time": true, "date-time": true, "uri": true, "iri": true,
	"uri-reference": true, "iri-reference": true, "uri-template": true, "semver": true,
	"regex": true,
}
