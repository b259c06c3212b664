// The one declaration xnnpack.h needs from <pthreadpool.h> (its line 15 includes it). Debian's libxnnpack-dev does
// not depend on libpthreadpool-dev, so the header is absent where the library is installed; fusediff passes no
// thread pool (NULL: every operator runs on the calling thread) and needs only the opaque handle type.
#pragma once
typedef struct pthreadpool* pthreadpool_t;
