package wake

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestPokesWhileTheWorkerIsBusyFoldIntoOneWakeUp(t *testing.T) {
	s := NewSignal()
	s.Poke()
	s.Poke() // must not block although nobody receives
	s.Poke()
	<-s
	select {
	case <-s:
		t.Fatal("three pokes while busy woke the worker twice; want once")
	default:
	}
}

func TestCondWaitReturnsOnceTheConditionHolds(t *testing.T) {
	var (
		mu    sync.Mutex
		cond  Cond
		count int
	)
	waiting := make(chan error)
	go func() {
		waiting <- cond.Wait(context.Background(), &mu, func() bool { return count >= 3 })
	}()
	for range 3 {
		mu.Lock()
		count++
		cond.Broadcast()
		mu.Unlock()
	}
	if err := <-waiting; err != nil {
		t.Fatalf("Wait = %v once count reached 3; want nil", err)
	}
}

func TestCondWaitReturnsAtOnceWhenTheConditionHolds(t *testing.T) {
	var (
		mu   sync.Mutex
		cond Cond
	)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cond.Wait(ctx, &mu, func() bool { return true }); err != nil {
		t.Fatalf("Wait = %v for a condition that holds; want nil even with the context ended", err)
	}
	if cond.changed != nil {
		t.Fatal("Wait made a channel for a condition that held at once")
	}
}

func TestCondWaitGivesUpWhenTheContextEnds(t *testing.T) {
	var (
		mu   sync.Mutex
		cond Cond
	)
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error)
	go func() {
		waiting <- cond.Wait(ctx, &mu, func() bool { return false })
	}()
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v after the context was cancelled; want context.Canceled", err)
	}
}
