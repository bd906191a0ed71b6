// rangeio/export.h — what librangeio exports.
//
// The library is built with hidden visibility: a shared librangeio.so
// exports only what the public headers mark RANGEIO_EXPORT (classes with
// out-of-line members, free functions), never an internal symbol. A static
// library needs no marking; the macro is harmless there.
#pragma once

#if defined(__GNUC__)
#define RANGEIO_EXPORT [[gnu::visibility("default")]]
#else
#define RANGEIO_EXPORT
#endif
