//! client-go's `tools/cache` tests, scenario by scenario: `delta_fifo_test.go`, `index_test.go`,
//! `thread_safe_store_test.go`, `reflector_test.go` and `the_real_fifo_test.go`.

mod delta_fifo;
mod index;
mod real_fifo;
mod reflector;
mod thread_safe_store;
