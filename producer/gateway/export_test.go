package gateway

// SetAfterOutputStored sets the hook called once a batch's output is
// stored, before it is read back; the returned func unsets it.
func SetAfterOutputStored(f func(tenant, id string)) func() {
	afterOutputStored = f
	return func() { afterOutputStored = nil }
}
