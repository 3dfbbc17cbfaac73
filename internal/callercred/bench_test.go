package callercred

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
)

// BenchmarkCallerCredentialsExchangeCache is the cost of a call's credential when the
// caller's exchanged token is cached (the common case), callers in parallel.
func BenchmarkCallerCredentialsExchangeCache(b *testing.B) {
	f := newFixture(b, tokenservice.Options{})
	e := f.exchanger(b, Options{Metrics: NewMetrics()})
	callers := make([]caller, 64)
	for i := range callers {
		callers[i] = f.caller(b, "c"+strconv.Itoa(i))
		token(b, e, callers[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c := callers[i%len(callers)]
			if _, err := e.Token(context.Background(), c.identity, c.token); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	if s := e.Stats(); s.Exchanges != uint64(len(callers)) {
		b.Fatalf("%d exchanges during the benchmark; want none after the first %d", s.Exchanges, len(callers))
	}
}

// BenchmarkCallerCredentialsExchangeMiss is the cost of a cache miss: one RFC 8693
// exchange at the (loopback, zitadel op) token service, client_secret_basic, each
// iteration a new caller.
func BenchmarkCallerCredentialsExchangeMiss(b *testing.B) {
	f := newFixture(b, tokenservice.Options{})
	e := f.exchanger(b, Options{})
	alice := f.caller(b, "alice")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := adapterconfig.ServiceAccountCaller("agents/alice", "uid-"+strconv.Itoa(i))
		if _, err := e.Token(context.Background(), id, alice.token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallerCredentialsMemoryPerCaller is the heap a cached caller costs at 10,000
// callers: the exchanged token (as long as a real one from the token service, each a
// distinct string), the caller's identity, and the cache's own bookkeeping.
func BenchmarkCallerCredentialsMemoryPerCaller(b *testing.B) {
	const callers = 10000
	f := newFixture(b, tokenservice.Options{})
	e := f.exchanger(b, Options{CacheSize: callers})
	sample := token(b, e, f.caller(b, "alice"))
	e.Forget(f.caller(b, "alice").identity)
	b.ReportAllocs()
	var perCaller float64
	for range b.N {
		cache, err := NewCache(callers, nil)
		if err != nil {
			b.Fatal(err)
		}
		e.cache = cache
		before := heapInUse()
		for i := range callers {
			identity := adapterconfig.ServiceAccountCaller(fmt.Sprintf("agents/agent-%05d", i), fmt.Sprintf("6f1c2a9e-0b3d-4c5e-8f7a-%012d", i))
			tok := []byte(sample)
			copy(tok[len(tok)-12:], fmt.Sprintf("%012d", i)) // distinct, same length
			e.cache.add(cacheKey{scope: e.scope, caller: identity}, &entry{token: string(tok), expires: 1})
		}
		after := heapInUse()
		if e.Len() != callers {
			b.Fatalf("Len = %d", e.Len())
		}
		perCaller = float64(after-before) / callers
		runtime.KeepAlive(cache)
	}
	b.ReportMetric(perCaller, "bytes/caller")
	b.ReportMetric(float64(len(sample)), "token-bytes")
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
