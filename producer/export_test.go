package producer

// Waiting returns how many jobs the client's Wait calls are waiting for.
func (c *Client) Waiting() int {
	c.results.mu.Lock()
	defer c.results.mu.Unlock()
	return len(c.results.waiters)
}

func (c *Client) Kept(jobID string) bool { return c.results.recent(jobID) != nil }
