package rdb

import "strconv"

// Where a sharded event's shards live (docs/QUEUE.md, "One sale over
// several shards"). Redis Cluster puts a key on slot CRC16(tag) mod 16384
// and, by default, gives each of its N masters one N-th of the slot range
// in order. So that shard i of K lands on its own master on such a cluster,
// its tag is chosen to fall in the i-th K-th of the slot range: the tag is
// "<event>#<i>" when that already does, else "<event>#<i>.<x>" for the
// smallest x that does. The names are a pure function of the event and K:
// every gateway and admitter finds the same ones without asking anybody.

const clusterSlots = 16384

// shardTag is the hash tag of shard i of an event spread over k shards.
func shardTag(event string, i, k int) string {
	base := event + "#" + strconv.Itoa(i)
	lo, hi := i*clusterSlots/k, (i+1)*clusterSlots/k
	if s := slotOf(base); s >= lo && s < hi {
		return base
	}
	for x := 1; ; x++ {
		tag := base + "." + strconv.Itoa(x)
		if s := slotOf(tag); s >= lo && s < hi {
			return tag
		}
	}
}

// slotOf is Redis Cluster's key slot of a hash tag's content.
func slotOf(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^tag[i]]
	}
	return int(crc) % clusterSlots
}

// crc16tab is CRC-16/XMODEM (polynomial 0x1021), Redis Cluster's key hash.
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
