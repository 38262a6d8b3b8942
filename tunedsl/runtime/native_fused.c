/* The fused launch of runtime/fused.py: a site entry's fast path for a repeated layout.

   One object per site entry. Calling it with (kernel, args, kwargs, bind) does what the
   site's generic path (the entry's repeat check, Entry.launch, the Launcher's direct
   launch) does for a call of the entry's layout, in one C call, and returns the entry's
   LaunchResult after launching, or None before launching for a call of another layout (or
   with holes): the site's generic path then takes it. It exists because the generic path's
   interpretive overhead (Python frames, a dozen bytecodes per argument) is most of what a
   tuned call costs above Triton's own launch for a kernel with many int arguments.

   It touches neither torch nor triton: everything it calls (the tensor guard, data_ptr,
   bind, the device and stream getters, the C launch) is a Python callable handed to it.
   It is built when the package is installed (setup.py: tunedsl.runtime._native_fused);
   where it could not be, runtime/native.py finds it missing and every call takes the
   generic path. Tests hold it to the generic path's decisions
   (tests/unit/runtime/test_native_fused.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* What each positional argument of the sample was, so what this call's must be
   (model/keys.py, repeat_check_code). */
enum {
    K_TENSOR = 0,           /* a tensor, alignment not keyed */
    K_TENSOR_ALIGNED = 1,   /* a tensor whose address is 16-byte aligned */
    K_TENSOR_UNALIGNED = 2, /* a tensor whose address is not */
    K_INT_ONE = 3,          /* an int equal to 1 */
    K_INT_16 = 4,           /* an int divisible by 16 */
    K_INT_OTHER = 5,        /* an int neither 1 nor divisible by 16 */
    K_FLOAT = 6,
    K_NONE = 7,
    K_HOLE = 8,             /* the runtime's HOLE marker */
    K_CONSTEXPR = 9         /* constexpr_key(arg) == expected */
};

#define I32_MIN (-2147483647L - 1)
#define I32_MAX 2147483647L
#define MAX_ARGS 256

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t arity;
    int kinds[MAX_ARGS];
    long lows[MAX_ARGS]; /* an int's lowest value: 0, or I32_MIN where the sample was < 0 */
    PyObject *expected;  /* tuple: constexpr_key of the sample at K_CONSTEXPR positions */
    Py_ssize_t n_tensors;
    Py_ssize_t tensor_pos[MAX_ARGS];
    int reads_pointers;
    int as_address; /* pass a tensor to run as the address read for its alignment */
    int packs_args;
    PyObject *kernel, *hole, *constexpr_key, *check, *config, *result, *entry, *launch;
    PyObject *dyn0, *rt, *run, *device, *get_device, *get_stream, *middle, *tail;
    PyObject *fallback; /* the site's call, for a call of six arguments this one turns down */
    PyObject *kwargs0;  /* the sample's keyword arguments (a dict), or None: none allowed */
} Fused;

static PyObject *str_data_ptr, *str_used, *str_enter, *str_exit, *str_calls;

static int fused_traverse(Fused *self, visitproc visit, void *arg) {
    Py_VISIT(self->expected);
    Py_VISIT(self->kernel);
    Py_VISIT(self->hole);
    Py_VISIT(self->constexpr_key);
    Py_VISIT(self->check);
    Py_VISIT(self->config);
    Py_VISIT(self->result);
    Py_VISIT(self->entry);
    Py_VISIT(self->launch);
    Py_VISIT(self->dyn0);
    Py_VISIT(self->rt);
    Py_VISIT(self->run);
    Py_VISIT(self->device);
    Py_VISIT(self->get_device);
    Py_VISIT(self->get_stream);
    Py_VISIT(self->middle);
    Py_VISIT(self->tail);
    Py_VISIT(self->fallback);
    Py_VISIT(self->kwargs0);
    return 0;
}

static int fused_clear(Fused *self) {
    Py_CLEAR(self->expected);
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->hole);
    Py_CLEAR(self->constexpr_key);
    Py_CLEAR(self->check);
    Py_CLEAR(self->config);
    Py_CLEAR(self->result);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->launch);
    Py_CLEAR(self->dyn0);
    Py_CLEAR(self->rt);
    Py_CLEAR(self->run);
    Py_CLEAR(self->device);
    Py_CLEAR(self->get_device);
    Py_CLEAR(self->get_stream);
    Py_CLEAR(self->middle);
    Py_CLEAR(self->tail);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->kwargs0);
    return 0;
}

static void fused_dealloc(Fused *self) {
    PyObject_GC_UnTrack(self);
    fused_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1: the int argument x passes the test of its kind; 0: it does not. */
static int int_passes(PyObject *x, int kind, long low) {
    if (!PyLong_CheckExact(x))
        return 0;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(x, &overflow);
    if (overflow || v < low || v > I32_MAX)
        return 0;
    if (kind == K_INT_ONE)
        return v == 1;
    if (kind == K_INT_16)
        return v % 16 == 0;
    return v != 1 && v % 16 != 0;
}

/* 1: value is was by triton_launch.same_value: the same object, an int, float, bool or str
   equal and of the same class (1, 1.0 and True are specialized apart; a float's zero of the
   same sign), or a tuple of such; 0: not (a tensor is never compared by ==); -1: an error. */
static int same_value(PyObject *value, PyObject *was) {
    if (value == was)
        return 1;
    PyTypeObject *type = Py_TYPE(value);
    if (type != Py_TYPE(was))
        return 0;
    if (type == &PyTuple_Type) {
        Py_ssize_t n = PyTuple_GET_SIZE(value);
        if (n != PyTuple_GET_SIZE(was))
            return 0;
        if (Py_EnterRecursiveCall(" comparing keyword arguments"))
            return -1;
        int same = 1;
        for (Py_ssize_t i = 0; i < n && same > 0; i++)
            same = same_value(PyTuple_GET_ITEM(value, i), PyTuple_GET_ITEM(was, i));
        Py_LeaveRecursiveCall();
        return same;
    }
    if (type == &PyFloat_Type) { /* -0.0 == 0.0, but the launch passes the first one's */
        double a = PyFloat_AS_DOUBLE(value), b = PyFloat_AS_DOUBLE(was);
        return a == b && !signbit(a) == !signbit(b);
    }
    if (type != &PyLong_Type && type != &PyBool_Type && type != &PyUnicode_Type)
        return 0;
    return PyObject_RichCompareBool(value, was, Py_EQ);
}

/* 1: the dict now has first's names, each value same_value as first's; 0: not; -1: an
   error. The one rule of RepeatCheckCode.kwargs_mismatch and triton_launch.same_keywords. */
static int same_dict(PyObject *now, PyObject *first) {
    if (PyDict_GET_SIZE(now) != PyDict_GET_SIZE(first))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *name, *want;
    while (PyDict_Next(first, &pos, &name, &want)) {
        PyObject *got = PyDict_GetItemWithError(now, name); /* borrowed */
        if (got == NULL)
            return PyErr_Occurred() ? -1 : 0;
        int same = same_value(got, want);
        if (same <= 0)
            return same;
    }
    return 1;
}

/* A call's keyword arguments against the sample's (a mapping other than a dict: not, the
   generic path takes it). */
static int kwargs_match(PyObject *kwargs, PyObject *sample) {
    return PyDict_CheckExact(kwargs) ? same_dict(kwargs, sample) : 0;
}

/* A call's configuration-dependent keyword arguments (bind's dict) against the first
   launch's (not: the launcher takes the call). */
static int keywords_match(PyObject *dyn, PyObject *dyn0) {
    return PyDict_Check(dyn) ? same_dict(dyn, dyn0) : 0;
}

/* Launch-hook test of compat.LAUNCH_HOOKED_CODE: 1 hooked, 0 not, -1 AttributeError (a hook
   assigned in place of Triton's chain: not direct), -2 another error (propagate). */
static int hooked(PyObject *rt) {
    PyObject *names[2] = {str_enter, str_exit};
    for (int i = 0; i < 2; i++) {
        PyObject *chain = PyObject_GetAttr(rt, names[i]);
        if (chain == NULL)
            goto error;
        PyObject *calls = PyObject_GetAttr(chain, str_calls);
        Py_DECREF(chain);
        if (calls == NULL)
            goto error;
        int truth = PyObject_IsTrue(calls);
        Py_DECREF(calls);
        if (truth < 0)
            return -2;
        if (truth)
            return 1;
    }
    return 0;
error:
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return -1;
    }
    return -2;
}

/* The fused launch proper: (kernel, args, kwargs, bind) -> the result, or None. */
static PyObject *fused_fast(Fused *self, PyObject *const *argv) {
    PyObject *kernel = argv[0], *args = argv[1], *kwargs = argv[2], *bind = argv[3];
    if (kernel != self->kernel)
        Py_RETURN_NONE;
    int kwargs_ok;
    if (self->kwargs0 == Py_None) {
        int has_kwargs = PyObject_IsTrue(kwargs);
        if (has_kwargs < 0)
            return NULL;
        kwargs_ok = !has_kwargs;
    } else {
        kwargs_ok = kwargs_match(kwargs, self->kwargs0);
        if (kwargs_ok < 0)
            return NULL;
    }
    /* The expansion passes a tuple; a list unpacks alike. Anything else: the generic path. */
    if (!kwargs_ok || !(PyTuple_CheckExact(args) || PyList_CheckExact(args)) ||
        PySequence_Fast_GET_SIZE(args) != self->arity)
        Py_RETURN_NONE;
    /* A list is copied: bind, Python code, could change it under our item pointers. */
    PyObject *items = PyList_CheckExact(args) ? PyList_AsTuple(args) : Py_NewRef(args);
    if (items == NULL)
        return NULL;
    PyObject *const *a = &PyTuple_GET_ITEM(items, 0);

    /* The tensors' class, dtype, device, shape and strides: one call of the guard. */
    PyObject *tensors[MAX_ARGS];
    for (Py_ssize_t i = 0; i < self->n_tensors; i++)
        tensors[i] = a[self->tensor_pos[i]];
    PyObject *pointers[MAX_ARGS] = {NULL}; /* by position; owned */
    PyObject *ret = NULL;
    PyObject *bound = NULL, *grid_seq = NULL;
    PyObject *ok = PyObject_Vectorcall(self->check, tensors, (size_t)self->n_tensors, NULL);
    if (ok == NULL)
        goto done;
    int layout_ok = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    if (layout_ok <= 0) {
        if (layout_ok == 0)
            ret = Py_NewRef(Py_None);
        goto done;
    }
    if (self->reads_pointers) {
        for (Py_ssize_t i = 0; i < self->n_tensors; i++) {
            Py_ssize_t p = self->tensor_pos[i];
            pointers[p] = PyObject_CallMethodNoArgs(a[p], str_data_ptr);
            if (pointers[p] == NULL)
                goto done;
        }
    }
    for (Py_ssize_t i = 0; i < self->arity; i++) {
        PyObject *x = a[i];
        int pass;
        switch (self->kinds[i]) {
        case K_TENSOR:
            pass = 1;
            break;
        case K_TENSOR_ALIGNED:
        case K_TENSOR_UNALIGNED: {
            unsigned long long address = PyLong_AsUnsignedLongLongMask(pointers[i]);
            if (address == (unsigned long long)-1 && PyErr_Occurred())
                goto done;
            pass = (address % 16 == 0) == (self->kinds[i] == K_TENSOR_ALIGNED);
            break;
        }
        case K_INT_ONE:
        case K_INT_16:
        case K_INT_OTHER:
            pass = int_passes(x, self->kinds[i], self->lows[i]);
            break;
        case K_FLOAT:
            pass = PyFloat_CheckExact(x);
            break;
        case K_NONE:
            pass = x == Py_None;
            break;
        case K_HOLE:
            pass = x == self->hole;
            break;
        default: { /* K_CONSTEXPR */
            PyObject *key = PyObject_CallOneArg(self->constexpr_key, x);
            if (key == NULL)
                goto done;
            pass = PyObject_RichCompareBool(key, PyTuple_GET_ITEM(self->expected, i), Py_EQ);
            Py_DECREF(key);
            if (pass < 0)
                goto done;
        }
        }
        if (!pass) {
            ret = Py_NewRef(Py_None);
            goto done;
        }
    }

    /* holes, dyn, grid = bind(CONFIG) */
    bound = PyObject_CallOneArg(bind, self->config);
    if (bound == NULL)
        goto done;
    if (!PyTuple_CheckExact(bound)) { /* as Python's unpacking: any sequence of three */
        PyObject *seq = PySequence_Fast(bound, "cannot unpack bind(config)");
        Py_SETREF(bound, seq);
        if (bound == NULL)
            goto done;
    }
    if (PySequence_Fast_GET_SIZE(bound) != 3) {
        PyErr_Format(PyExc_ValueError, "bind(config) returned %zd values, not 3 (holes, "
                     "dyn_kwargs, grid)", PySequence_Fast_GET_SIZE(bound));
        goto done;
    }
    PyObject *holes = PySequence_Fast_GET_ITEM(bound, 0);
    PyObject *dyn = PySequence_Fast_GET_ITEM(bound, 1);
    PyObject *grid = PySequence_Fast_GET_ITEM(bound, 2);
    int any_holes = PyObject_IsTrue(holes);
    if (any_holes != 0) {
        if (any_holes > 0)
            ret = Py_NewRef(Py_None);
        goto done;
    }
    if (PyObject_SetAttr(self->entry, str_used, Py_True) < 0)
        goto done;
    int direct = keywords_match(dyn, self->dyn0);
    if (direct < 0)
        goto done;
    if (direct) {
        int h = hooked(self->rt);
        if (h == -2)
            goto done;
        direct = h == 0;
    }
    if (direct) {
        PyObject *device = PyObject_CallNoArgs(self->get_device);
        if (device == NULL)
            goto done;
        int same = PyObject_RichCompareBool(device, self->device, Py_EQ);
        Py_DECREF(device);
        if (same < 0)
            goto done;
        direct = same;
    }
    if (!direct) {
        PyObject *launch_args[5] = {grid, args, kwargs, dyn, holes};
        PyObject *r = PyObject_Vectorcall(self->launch, launch_args, 5, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
        ret = Py_NewRef(self->result);
        goto done;
    }

    /* run(g0, g1, g2, get_stream(DEVICE), *middle, *kernel_args) with kernel_args the
       arguments (tensors as addresses where as_address) and the tail, packed in one
       tuple where packs_args. */
    /* As Python's len(grid) and grid[i]: any sequence; the first three of a longer one. */
    grid_seq = PySequence_Fast(grid, "a launch grid must be a sequence");
    if (grid_seq == NULL)
        goto done;
    Py_ssize_t n_grid = PySequence_Fast_GET_SIZE(grid_seq);
    if (n_grid < 1) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        goto done;
    }
    PyObject *stream = PyObject_CallOneArg(self->get_stream, self->device);
    if (stream == NULL)
        goto done;
    Py_ssize_t n_middle = PyTuple_GET_SIZE(self->middle), n_tail = PyTuple_GET_SIZE(self->tail);
    Py_ssize_t n_kernel = self->arity + n_tail;
    PyObject *stack[4 + 64 + MAX_ARGS + 64];
    if (n_middle > 64 || n_tail > 64) {
        Py_DECREF(stream);
        PyErr_SetString(PyExc_ValueError, "fused launch: too many launcher arguments");
        goto done;
    }
    PyObject *one = PyLong_FromLong(1); /* a cached small int */
    stack[0] = PySequence_Fast_GET_ITEM(grid_seq, 0);
    stack[1] = n_grid > 1 ? PySequence_Fast_GET_ITEM(grid_seq, 1) : one;
    stack[2] = n_grid > 2 ? PySequence_Fast_GET_ITEM(grid_seq, 2) : one;
    stack[3] = stream;
    Py_ssize_t n = 4;
    for (Py_ssize_t i = 0; i < n_middle; i++)
        stack[n++] = PyTuple_GET_ITEM(self->middle, i);
    PyObject *r;
    if (self->packs_args) {
        PyObject *packed = PyTuple_New(n_kernel);
        if (packed == NULL) {
            Py_DECREF(stream);
            Py_DECREF(one);
            goto done;
        }
        for (Py_ssize_t i = 0; i < self->arity; i++) {
            PyObject *x = self->as_address && pointers[i] != NULL ? pointers[i] : a[i];
            PyTuple_SET_ITEM(packed, i, Py_NewRef(x));
        }
        for (Py_ssize_t i = 0; i < n_tail; i++)
            PyTuple_SET_ITEM(packed, self->arity + i, Py_NewRef(PyTuple_GET_ITEM(self->tail, i)));
        stack[n++] = packed;
        r = PyObject_Vectorcall(self->run, stack, (size_t)n, NULL);
        Py_DECREF(packed);
    } else {
        for (Py_ssize_t i = 0; i < self->arity; i++)
            stack[n++] = self->as_address && pointers[i] != NULL ? pointers[i] : a[i];
        for (Py_ssize_t i = 0; i < n_tail; i++)
            stack[n++] = PyTuple_GET_ITEM(self->tail, i);
        r = PyObject_Vectorcall(self->run, stack, (size_t)n, NULL);
    }
    Py_DECREF(stream);
    Py_DECREF(one);
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    ret = Py_NewRef(self->result);

done:
    Py_DECREF(items);
    Py_XDECREF(grid_seq);
    Py_XDECREF(bound);
    for (Py_ssize_t i = 0; i < self->n_tensors; i++)
        Py_XDECREF(pointers[self->tensor_pos[i]]);
    return ret;
}

/* fused(kernel, args, kwargs, bind): the result, or None for a call the generic path takes.
   fused(kernel, args, kwargs, bind, key, lazy), where built with a fallback: the site's
   call itself, the fallback taking the calls this one turns down. */
static PyObject *fused_call(PyObject *callable, PyObject *const *argv, size_t nargsf,
                            PyObject *kwnames) {
    Fused *self = (Fused *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int whole_call = nargs == 6 && self->fallback != Py_None;
    if ((nargs != 4 && !whole_call) || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        self->fallback == Py_None
                            ? "fused(kernel, args, kwargs, bind): 4 positional arguments"
                            : "fused(kernel, args, kwargs, bind[, key, lazy]): 4 or 6 positional "
                              "arguments");
        return NULL;
    }
    PyObject *result = fused_fast(self, argv);
    if (result != Py_None || !whole_call)
        return result;
    Py_DECREF(result);
    return PyObject_Vectorcall(self->fallback, argv, 6, NULL);
}

static PyObject *fused_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    /* Fused(kernel, kinds, lows, expected, tensor_positions, reads_pointers, as_address,
             hole, constexpr_key, check, config, result, entry, launch, dyn0, rt, run,
             device, get_device, get_stream, middle, tail, packs_args[, fallback]) */
    PyObject *kernel, *kinds, *lows, *expected, *tensor_positions, *hole, *constexpr_key;
    PyObject *check, *config, *result, *entry, *launch, *dyn0, *rt, *run, *device;
    PyObject *get_device, *get_stream, *middle, *tail, *fallback = Py_None, *kwargs0 = Py_None;
    int reads_pointers, as_address, packs_args;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Fused takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!ppOOOOOOOOOOOOOO!O!p|OO", &kernel, &PyTuple_Type, &kinds,
                          &PyTuple_Type, &lows, &PyTuple_Type, &expected, &PyTuple_Type,
                          &tensor_positions, &reads_pointers, &as_address, &hole, &constexpr_key,
                          &check, &config, &result, &entry, &launch, &dyn0, &rt, &run, &device,
                          &get_device, &get_stream, &PyTuple_Type, &middle, &PyTuple_Type, &tail,
                          &packs_args, &fallback, &kwargs0))
        return NULL;
    if (!PyDict_Check(dyn0)) {
        PyErr_SetString(PyExc_TypeError, "Fused: the first launch's keyword arguments: a dict");
        return NULL;
    }
    if (kwargs0 != Py_None && !PyDict_CheckExact(kwargs0)) {
        PyErr_SetString(PyExc_TypeError, "Fused: the sample's keyword arguments: a dict or None");
        return NULL;
    }
    Py_ssize_t arity = PyTuple_GET_SIZE(kinds);
    Py_ssize_t n_tensors = PyTuple_GET_SIZE(tensor_positions);
    if (arity > MAX_ARGS || PyTuple_GET_SIZE(lows) != arity ||
        PyTuple_GET_SIZE(expected) != arity || n_tensors > arity) {
        PyErr_SetString(PyExc_ValueError, "Fused: kinds, lows and expected differ in length");
        return NULL;
    }
    Fused *self = (Fused *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fused_call;
    self->arity = arity;
    for (Py_ssize_t i = 0; i < arity; i++) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        long low = PyLong_AsLong(PyTuple_GET_ITEM(lows, i));
        if (PyErr_Occurred() || kind < K_TENSOR || kind > K_CONSTEXPR) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "Fused: unknown kind %ld", kind);
            Py_DECREF(self);
            return NULL;
        }
        self->kinds[i] = (int)kind;
        self->lows[i] = low;
    }
    self->n_tensors = n_tensors;
    for (Py_ssize_t i = 0; i < n_tensors; i++) {
        Py_ssize_t p = PyLong_AsSsize_t(PyTuple_GET_ITEM(tensor_positions, i));
        if (PyErr_Occurred() || p < 0 || p >= arity) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Fused: a tensor position out of range");
            Py_DECREF(self);
            return NULL;
        }
        int kind = self->kinds[p];
        if (kind > K_TENSOR_UNALIGNED || (kind != K_TENSOR && !reads_pointers)) {
            PyErr_SetString(PyExc_ValueError, "Fused: a tensor position of a non-tensor kind");
            Py_DECREF(self);
            return NULL;
        }
        self->tensor_pos[i] = p;
    }
    self->reads_pointers = reads_pointers;
    self->as_address = as_address && reads_pointers;
    self->packs_args = packs_args;
    self->expected = Py_NewRef(expected);
    self->kernel = Py_NewRef(kernel);
    self->hole = Py_NewRef(hole);
    self->constexpr_key = Py_NewRef(constexpr_key);
    self->check = Py_NewRef(check);
    self->config = Py_NewRef(config);
    self->result = Py_NewRef(result);
    self->entry = Py_NewRef(entry);
    self->launch = Py_NewRef(launch);
    self->dyn0 = Py_NewRef(dyn0);
    self->rt = Py_NewRef(rt);
    self->run = Py_NewRef(run);
    self->device = Py_NewRef(device);
    self->get_device = Py_NewRef(get_device);
    self->get_stream = Py_NewRef(get_stream);
    self->middle = Py_NewRef(middle);
    self->tail = Py_NewRef(tail);
    self->fallback = Py_NewRef(fallback);
    self->kwargs0 = Py_NewRef(kwargs0);
    return (PyObject *)self;
}

static PyObject *fused_takes_whole_call(Fused *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->fallback != Py_None);
}

static PyObject *fused_fallback(Fused *self, void *closure) {
    (void)closure;
    return Py_NewRef(self->fallback);
}

static PyGetSetDef fused_getset[] = {
    {"takes_whole_call", (getter)fused_takes_whole_call, NULL,
     "Built with a fallback: callable as the site's call (six arguments).", NULL},
    {"fallback", (getter)fused_fallback, NULL,
     "The site's call this one hands the calls it turns down to (None without one).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FusedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tunedsl.runtime._native_fused.Fused",
    .tp_basicsize = sizeof(Fused),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "The fused launch of one site entry (runtime/fused.py), in C.",
    .tp_new = fused_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Fused, vectorcall),
    .tp_traverse = (traverseproc)fused_traverse,
    .tp_clear = (inquiry)fused_clear,
    .tp_dealloc = (destructor)fused_dealloc,
    .tp_getset = fused_getset,
};

/* setup.py defines it as a digest of this file, so the package can tell an extension built
   from an older copy of the source (native.py). */
#ifndef TUNEDSL_SOURCE_DIGEST
#define TUNEDSL_SOURCE_DIGEST ""
#endif

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tunedsl.runtime._native_fused",
    .m_doc = "tunedsl's fused launch in C.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__native_fused(void) {
    if (PyType_Ready(&FusedType) < 0)
        return NULL;
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_used = PyUnicode_InternFromString("used");
    str_enter = PyUnicode_InternFromString("launch_enter_hook");
    str_exit = PyUnicode_InternFromString("launch_exit_hook");
    str_calls = PyUnicode_InternFromString("calls");
    if (!str_data_ptr || !str_used || !str_enter || !str_exit || !str_calls)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FusedType);
    if (PyModule_AddObject(m, "Fused", (PyObject *)&FusedType) < 0) {
        Py_DECREF(&FusedType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "SOURCE_DIGEST", TUNEDSL_SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
