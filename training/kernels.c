/* CPU kernels of the GPT-2 engine: instantiates kernels_impl.h in float (the engine's precision, plain names)
 * and double (`_f64` names, for the finite-difference gradient check only). See kernels_impl.h for shapes and
 * the accumulate-into-gradients (+=) convention; kernels.h lists the entry points.
 */
#include "kernels.h"

#define REAL float
#define KFN(name) name
#include "kernels_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(name) name##_f64
#include "kernels_impl.h"
#undef REAL
#undef KFN
