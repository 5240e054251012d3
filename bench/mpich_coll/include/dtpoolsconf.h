/* Hand-written config for building MPICH 4.0.2's DTPools (test/mpi/dtpools)
   outside its configure: what configure finds on Debian 12 (x86_64). */
#ifndef DTPOOLSCONF_H_INCLUDED
#define DTPOOLSCONF_H_INCLUDED
#define HAVE_INTTYPES_H 1
#define HAVE_LIMITS_H 1
#define HAVE_MEMSET 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRDUP 1
#define HAVE_STRING_H 1
#define STDC_HEADERS 1
#endif
