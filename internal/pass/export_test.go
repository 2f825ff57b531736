package pass

// CacheLen is how many tokens c holds.
func CacheLen(c *Cache) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.took)
}
