package price

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// iso4217 lists the ISO 4217 currencies billing accepts, with the number
// of decimal places of each one's minor unit. Codes without a minor unit
// (precious metals, XDR, the testing code XTS, XXX) are left out: nothing
// can be invoiced in them. Funds codes (BOV, CHE, CHW, CLF, COU, MXV, USN,
// UYI, UYW) are in, as ISO lists them.
var iso4217 = map[string]int32{
	"AED": 2, "AFN": 2, "ALL": 2, "AMD": 2, "ANG": 2, "AOA": 2, "ARS": 2, "AUD": 2, "AWG": 2, "AZN": 2,
	"BAM": 2, "BBD": 2, "BDT": 2, "BGN": 2, "BHD": 3, "BIF": 0, "BMD": 2, "BND": 2, "BOB": 2, "BOV": 2,
	"BRL": 2, "BSD": 2, "BTN": 2, "BWP": 2, "BYN": 2, "BZD": 2, "CAD": 2, "CDF": 2, "CHE": 2, "CHF": 2,
	"CHW": 2, "CLF": 4, "CLP": 0, "CNY": 2, "COP": 2, "COU": 2, "CRC": 2, "CUP": 2, "CVE": 2, "CZK": 2,
	"DJF": 0, "DKK": 2, "DOP": 2, "DZD": 2, "EGP": 2, "ERN": 2, "ETB": 2, "EUR": 2, "FJD": 2, "FKP": 2,
	"GBP": 2, "GEL": 2, "GHS": 2, "GIP": 2, "GMD": 2, "GNF": 0, "GTQ": 2, "GYD": 2, "HKD": 2, "HNL": 2,
	"HTG": 2, "HUF": 2, "IDR": 2, "ILS": 2, "INR": 2, "IQD": 3, "IRR": 2, "ISK": 0, "JMD": 2, "JOD": 3,
	"JPY": 0, "KES": 2, "KGS": 2, "KHR": 2, "KMF": 0, "KPW": 2, "KRW": 0, "KWD": 3, "KYD": 2, "KZT": 2,
	"LAK": 2, "LBP": 2, "LKR": 2, "LRD": 2, "LSL": 2, "LYD": 3, "MAD": 2, "MDL": 2, "MGA": 2, "MKD": 2,
	"MMK": 2, "MNT": 2, "MOP": 2, "MRU": 2, "MUR": 2, "MVR": 2, "MWK": 2, "MXN": 2, "MXV": 2, "MYR": 2,
	"MZN": 2, "NAD": 2, "NGN": 2, "NIO": 2, "NOK": 2, "NPR": 2, "NZD": 2, "OMR": 3, "PAB": 2, "PEN": 2,
	"PGK": 2, "PHP": 2, "PKR": 2, "PLN": 2, "PYG": 0, "QAR": 2, "RON": 2, "RSD": 2, "RUB": 2, "RWF": 0,
	"SAR": 2, "SBD": 2, "SCR": 2, "SDG": 2, "SEK": 2, "SGD": 2, "SHP": 2, "SLE": 2, "SOS": 2, "SRD": 2,
	"SSP": 2, "STN": 2, "SVC": 2, "SYP": 2, "SZL": 2, "THB": 2, "TJS": 2, "TMT": 2, "TND": 3, "TOP": 2,
	"TRY": 2, "TTD": 2, "TWD": 2, "TZS": 2, "UAH": 2, "UGX": 0, "USD": 2, "USN": 2, "UYI": 0, "UYU": 2,
	"UYW": 4, "UZS": 2, "VED": 2, "VES": 2, "VND": 0, "VUV": 0, "WST": 2, "XAF": 0, "XCD": 2, "XCG": 2,
	"XOF": 0, "XPF": 0, "YER": 2, "ZAR": 2, "ZMW": 2, "ZWG": 2,
}

// ValidateCurrency returns nil for an ISO 4217 currency billing can
// invoice in (see MinorUnits), and an error saying what is wrong
// otherwise: not three capital letters, or not an ISO 4217 code with a
// minor unit.
func ValidateCurrency(code string) error {
	if _, ok := iso4217[code]; ok {
		return nil
	}
	if len(code) != 3 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' || code[2] < 'A' || code[2] > 'Z' {
		return fmt.Errorf("currency %q is not an ISO 4217 code such as USD or EUR (three capital letters)", code)
	}
	return fmt.Errorf("currency %q is not an ISO 4217 currency with a minor unit (USD, EUR, JPY, …)", code)
}

// MinorUnits returns the number of decimal places of currency's minor
// unit under ISO 4217: 0 for JPY, 3 for KWD, 2 for USD and EUR. A code
// billing does not know (ValidateCurrency refuses it, but rows stored
// before it did may carry one) counts as 2.
func MinorUnits(currency string) int32 {
	if n, ok := iso4217[currency]; ok {
		return n
	}
	return 2
}

// CheckMinorUnits returns an error when amount is not a whole number of
// currency's minor units (0.005 USD, 0.5 JPY): money that is paid or
// credited must be, unlike a unit price.
func CheckMinorUnits(amount decimal.Decimal, currency string) error {
	n := MinorUnits(currency)
	if !amount.Equal(amount.Round(n)) {
		return fmt.Errorf("amount %s has more decimals than %s's minor unit allows (%d)", amount, currency, n)
	}
	return nil
}
