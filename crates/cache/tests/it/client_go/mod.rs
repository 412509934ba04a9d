//! client-go's `tools/cache` tests, scenario by scenario: `delta_fifo_test.go`, `index_test.go`,
//! `thread_safe_store_test.go` and `reflector_test.go`.

mod delta_fifo;
mod index;
mod reflector;
mod thread_safe_store;
