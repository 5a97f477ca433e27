// The emulated accelerator's runtime state: how many devices a process has, which device
// each host thread works on, and whether the thread is a stream executor running device
// work. Like a GPU, an emulated device's memory belongs to its streams: host code that
// reads or writes it outside an executor of that device is an error (Tensor::raw), and a
// thread touching device N's streams or copies while bound to device M is an error.
// A thread that never bound a device works on device 0, as a CUDA thread does.
#pragma once

namespace st::emu {

// Devices per process: SPARSETRAIN_EMU_DEVICES (1..64), default 8.
int device_count();

// Binds the calling thread to `device` (cudaSetDevice); throws for a device that does not
// exist.
void set_thread_device(int device);
// The device this thread bound (-1: never bound).
int thread_device();
// The device this thread works on: its binding, else device 0.
int current_device();
// Throws one line naming `what`, both devices and the thread's binding unless the calling
// thread works on `device` (or is an executor of it).
void check_thread_on(int device, const char* what);

// The device whose stream executor runs on this thread, or on whose behalf it runs as a
// thread of an OpenMP parallel region an executor's task started (-1: a host thread).
int executing_device();
// Marks the calling thread as an executor of `device` (stream threads, once at start).
void set_executing_device(int device);

// Microseconds every executor sleeps before each kernel task (not copies or event marks):
// SPARSETRAIN_EMU_DELAY_US at start, or set_task_delay_us (tests). Widens every race a
// missing event or fence leaves open.
int task_delay_us();
void set_task_delay_us(int us);

// Reads every SPARSETRAIN_EMU_* setting now, on the calling thread, so a bad value is one
// line where the device is chosen (the CLI) or a stream made, never an error on a stream
// executor.
void read_environment();

}  // namespace st::emu
