/*
 * interp.c — see interp.h. The names are CPython 3.8-3.15's (Objects/,
 * Python/ceval.c, Modules/_functoolsmodule.c); a name that a version does
 * not have costs nothing. Each group says why it is machinery. What is not
 * listed is shown, so a new CPython function is visible until someone
 * decides it is machinery: hiding work by mistake would be worse than
 * showing a trampoline.
 */
#include "interp.h"

#include <string.h>

#include "merge.h"

/* Exact names. */
static const char *const machinery[] = {
	/* The eval loop and its entry points: each activation is replaced
	 * by the Python frames it runs (merge.c). */
	"_PyEval_EvalFrame", "PyEval_EvalFrame", "PyEval_EvalFrameEx", "_PyEval_Vector", "_PyEval_EvalCode",
	"_PyEval_EvalCodeWithName", "PyEval_EvalCode", "PyEval_EvalCodeEx", "function_code_fastcall",
	"call_function", "do_call_core", "trace_call_function", "_Py_CheckFunctionResult", "_Py_CheckSlotResult",
	/* 3.12+'s -X perf: the evaluator that enters the eval loop through
	 * a function's trampoline (the trampolines themselves are folded by
	 * native.c). */
	"py_trampoline_evaluator",

	/* Setting up and tearing down a Python frame: the cost of the call,
	 * which belongs to the line that made it. */
	"_PyEvalFramePushAndInit", "_PyEvalFrameClearAndPop", "_PyEval_FrameClearAndPop", "_PyEval_MakeFrameVector",
	"_PyFrame_Clear", "_PyFrame_ClearExceptCode", "clear_thread_frame", "clear_gen_frame",
	"_PyThreadState_PushFrame", "_PyThreadState_PopFrame", "_PyThreadState_BumpFramePointerSlow",
	"_PyThreadState_BumpFramePointer", "_PyFrame_New_NoTrack", "_PyFrame_Initialize", "frame_dealloc",
	"initialize_locals", "_PyFrame_Push", "push_frame", "_PyFrame_PushUnchecked", "_PyFrame_PushTrampolineUnchecked",
	"_PyFrame_InitializeSpecials", "_PyThreadState_HasStackSpace",

	/* The call protocol (Objects/call.c): vectorcall, tp_call and the
	 * PyObject_Call* family pick the callee and pass the arguments. */
	"PyObject_Call", "PyObject_CallObject", "PyObject_CallNoArgs", "PyObject_CallOneArg",
	"PyObject_CallFunction", "PyObject_CallFunctionObjArgs", "PyObject_CallMethod", "PyObject_CallMethodObjArgs",
	"PyObject_CallMethodNoArgs", "PyObject_CallMethodOneArg", "PyObject_Vectorcall", "PyObject_VectorcallDict",
	"PyObject_VectorcallMethod", "PyVectorcall_Call", "_PyVectorcall_Call", "PyCFunction_Call",
	"_PyObject_Call", "_PyObject_CallNoArg", "_PyObject_CallNoArgs", "_PyObject_CallNoArgsTstate",
	"_PyObject_CallNoArgTstate",
	"_PyObject_CallOneArg", "_PyObject_CallFunctionVa", "_PyObject_CallFunction_SizeT", "_PyObject_CallMethod",
	"_PyObject_CallMethodFormat", "_PyObject_CallMethodId", "_PyObject_CallMethodIdObjArgs",
	"_PyObject_CallMethodId_SizeT", "_PyObject_CallMethod_SizeT", "_PyObject_CallMethodIdNoArgs",
	"_PyObject_CallMethodIdOneArg", "_PyObject_CallMethodNoArgs", "_PyObject_CallMethodOneArg",
	"_PyObject_Call_Prepend", "_PyObject_FastCall", "_PyObject_FastCallDict", "_PyObject_FastCallDictTstate",
	"_PyObject_FastCall_Prepend", "_PyObject_FastCallTstate", "_PyObject_Vectorcall", "_PyObject_VectorcallDictTstate",
	"_PyObject_VectorcallTstate", "_PyObject_VectorcallMethod", "_PyObject_VectorcallMethodId",
	"_PyObject_MakeTpCall", "PyEval_CallObjectWithKeywords", "PyEval_CallFunction", "PyEval_CallMethod",
	"object_vacall", "callmethod", "_PyStack_AsDict", "_PyStack_UnpackDict", "_PyStack_UnpackDict_Free",
	"_PyStack_UnpackDict_FreeNoDecRef", "_Py_Call", "PyVectorcall_Function", "_PyVectorcall_Function",
	"PyObject_CallFinalizer", "PyObject_CallFinalizerFromDealloc",
	"_PyVectorcall_FunctionInline", "PyVectorcall_NARGS", "_PyVectorcall_NARGS",
	/* 3.15: the eval loop's calls through tagged stack references
	 * (Python/ceval.c, "helper functions for large uops" in
	 * pycore_ceval.h), converting the arguments and calling vectorcall,
	 * a builtin function's or method descriptor's C function, or a
	 * builtin type; the callee is shown. */
	"_Py_VectorCall_StackRefSteal", "_Py_VectorCallInstrumentation_StackRefSteal",
	"_Py_BuiltinCallFast_StackRef", "_Py_BuiltinCallFastWithKeywords_StackRef",
	"_PyCallMethodDescriptorFast_StackRef", "_PyCallMethodDescriptorFastWithKeywords_StackRef",
	"_Py_CallBuiltinClass_StackRef",
	/* The recursion limit checked around each call. */
	"_Py_EnterRecursiveCall", "_Py_EnterRecursiveCallTstate", "_Py_EnterRecursiveCallTstateUnchecked",
	"_Py_EnterRecursiveCall_inline", "_Py_LeaveRecursiveCall", "_Py_LeaveRecursiveCallTstate",
	"_Py_LeaveRecursiveCall_inline", "_Py_MakeRecCheck", "_Py_CheckRecursiveCall", "Py_EnterRecursiveCall",
	"Py_LeaveRecursiveCall",

	/* Argument parsing of C functions (Python/getargs.c): how a call
	 * hands its arguments over, the callee's own business. */
	"convertitem", "convertsimple", "converttuple", "vgetargs1", "vgetargs1_impl", "vgetargskeywords",
	"vgetargskeywordsfast", "vgetargskeywordsfast_impl", "cleanreturn",

	/* Python functions and bound methods as callables: they only hand
	 * their arguments to the eval loop. */
	"_PyFunction_Vectorcall", "_PyFunction_FastCallDict", "_PyFunction_FastCallKeywords", "function_call",
	"method_vectorcall", "method_call", "instancemethod_call", "sm_call",

	/* Builtin functions and methods written in C (PyCFunction, method
	 * descriptors): argument passing for the C function, which is shown. */
	"cfunction_call", "cfunction_call_varargs", "cfunction_enter_call", "_PyCFunction_FastCallDict",
	"_PyCFunction_FastCallKeywords",
	"_PyMethodDef_RawFastCallDict", "_PyMethodDef_RawFastCallKeywords", "methoddescr_call",
	"classmethoddescr_call", "method_vectorcall_VARARGS", "method_vectorcall_VARARGS_KEYWORDS",
	"method_vectorcall_FASTCALL", "method_vectorcall_FASTCALL_KEYWORDS", "method_vectorcall_FASTCALL_KEYWORDS_METHOD",
	"method_vectorcall_NOARGS", "method_vectorcall_O", "method_enter_call", "method_check_args",
	"_Py_EnsureFuncTstateNotNULL", "_Py_EnsureTstateNotNULL",

	/* Slot wrappers: a C slot (wrapper_descriptor, method-wrapper) called
	 * from Python, and a Python __dunder__ method called through a C slot
	 * (slot_* and the method lookup it does). */
	"wrapperdescr_call", "wrapperdescr_raw_call", "wrapper_call", "vectorcall_method", "vectorcall_unbound",
	"vectorcall_maybe", "call_method", "call_maybe", "call_unbound", "call_unbound_noarg", "lookup_maybe_method",
	"lookup_method", "tp_new_wrapper",

	/* Descriptors that bind or forward: a method bound to its object, a
	 * property's getter called. */
	"func_descr_get", "method_get", "classmethod_get", "cm_descr_get", "sm_descr_get", "wrapperdescr_get",
	"property_descr_get", "property_descr_set", "getset_get", "getset_set", "PyMethod_New",

	/* Calling a type: type_call and the vectorcall shortcuts of builtin
	 * types check arguments and call the constructor, which is shown. */
	"type_call", "type_vectorcall", "list_vectorcall", "tuple_vectorcall", "dict_vectorcall", "set_vectorcall",
	"frozenset_vectorcall", "range_vectorcall", "map_vectorcall", "filter_vectorcall", "enumerate_vectorcall",
	"reversed_vectorcall", "float_vectorcall", "long_vectorcall", "bool_vectorcall", "unicode_vectorcall",
	"super_vectorcall", "weakref_vectorcall", "ga_vectorcall", "ga_call", "weakref_call", "proxy_call",

	/* functools.partial: a call forwarded with more arguments. */
	"partial_call", "partial_vectorcall", "partial_vectorcall_fallback", "partial_fastcall",

	/* Reference counting (static inline in object.h): a line of the
	 * function that uses it; the deallocator it may call is shown. */
	"Py_INCREF", "Py_DECREF", "Py_XINCREF", "Py_XDECREF", "_Py_INCREF", "_Py_DECREF", "_Py_XINCREF",
	"_Py_XDECREF", "_Py_DECREF_INT", "_Py_DECREF_SPECIALIZED", "_Py_DECREF_NO_DEALLOC", "Py_NewRef",
	"Py_XNewRef", "_Py_NewRef", "_Py_XNewRef", "_Py_IsImmortal",

	/* Abstract-object dispatch (Objects/abstract.c, object.c): pick the
	 * operand type's slot and call it; the slot (long_add,
	 * dict_subscript, unicode_compare_eq...) is shown. */
	"PyNumber_Add", "PyNumber_Subtract", "PyNumber_Multiply", "PyNumber_MatrixMultiply", "PyNumber_TrueDivide",
	"PyNumber_FloorDivide", "PyNumber_Remainder", "PyNumber_Divmod", "PyNumber_Power", "PyNumber_Lshift",
	"PyNumber_Rshift", "PyNumber_And", "PyNumber_Or", "PyNumber_Xor", "PyNumber_Negative", "PyNumber_Positive",
	"PyNumber_Absolute", "PyNumber_Invert", "PyNumber_InPlaceAdd", "PyNumber_InPlaceSubtract",
	"PyNumber_InPlaceMultiply", "PyNumber_InPlaceMatrixMultiply", "PyNumber_InPlaceTrueDivide",
	"PyNumber_InPlaceFloorDivide", "PyNumber_InPlaceRemainder", "PyNumber_InPlacePower", "PyNumber_InPlaceLshift",
	"PyNumber_InPlaceRshift", "PyNumber_InPlaceAnd", "PyNumber_InPlaceOr", "PyNumber_InPlaceXor",
	"_PyNumber_InPlacePowerNoMod", "_PyNumber_PowerNoMod", "binary_op", "binary_op1", "binary_iop", "binary_iop1",
	"ternary_op", "ternary_iop", "PyObject_GetItem", "PyObject_SetItem", "PyObject_DelItem", "PySequence_GetItem",
	"PySequence_SetItem", "PySequence_DelItem", "PyMapping_GetItemString", "PyObject_RichCompare",
	"PyObject_RichCompareBool", "do_richcompare", "PyObject_GetAttr", "PyObject_SetAttr", "PyObject_GetIter",
	"PyIter_Next", "PyObject_Hash", "PyObject_Repr", "PyObject_Str", "PyObject_IsTrue", "PyObject_Not",
	"PyObject_Size", "PyObject_Length", "PySequence_Size", "PySequence_Length", "PyMapping_Size",
	"PySequence_Contains", "PyObject_Format", "PyNumber_Index", "_PyNumber_Index", "_Py_Dealloc",
	"_Py_Dealloc_inline",
};

/* Name prefixes: families too long to list, every member of which is
 * machinery in every version checked (3.8-3.13 libpython symbols). */
static const char *const machinery_prefix[] = {
	/* cfunction_vectorcall_O, _NOARGS, _FASTCALL...: builtin functions. */
	"cfunction_vectorcall_",
	/* PyArg_ParseTuple, _PyArg_UnpackKeywords...: argument parsing. */
	"PyArg_", "_PyArg_",
	/* slot_tp_call, slot_nb_add, slot_sq_item...: a Python __dunder__
	 * called through a C slot. */
	"slot_tp_", "slot_nb_", "slot_sq_", "slot_mp_", "slot_am_", "slot_bf_",
	/* wrap_binaryfunc, wrap_lenfunc...: a C slot called as __dunder__. */
	"wrap_",
};

int interp_is_machinery(const char *name)
{
	if (!name)
		return 1;
	if (merge_is_eval_name(name))
		return 1;
	/* gcc's split-off parts (.cold, .part.0, .isra.0, .constprop.0)
	 * and PLT stubs (NAME@plt: linkage, calling the named function)
	 * are judged by the function's own name. */
	size_t n = strcspn(name, ".@");
	if (name[n] == '@')
		return 1;
	for (size_t i = 0; i < sizeof(machinery) / sizeof(machinery[0]); i++)
		if (!strncmp(name, machinery[i], n) && machinery[i][n] == 0)
			return 1;
	for (size_t i = 0; i < sizeof(machinery_prefix) / sizeof(machinery_prefix[0]); i++) {
		size_t k = strlen(machinery_prefix[i]);
		if (k <= n && !strncmp(name, machinery_prefix[i], k))
			return 1;
	}
	return 0;
}

/* The collector's entry points (Modules/gcmodule.c, 3.13+ Python/gc.c):
 * an automatic collection (collect_generations, gc_collect_generations,
 * 3.12+ _Py_RunGC from the eval breaker), an explicit one (gc.collect()'s
 * gc_collect, PyGC_Collect, _PyGC_CollectNoFail at shutdown), and the
 * collection itself (3.8, 3.9 collect; 3.10+ gc_collect_main; 3.13+
 * _PyGC_Collect and its per-kind parts). Any of them marks the collector;
 * the outermost one found counts. */
static const char *const gc_entry[] = {
	"collect", "collect_with_callback", "collect_generations", "gc_collect_main", "gc_collect_with_callback",
	"gc_collect_generations", "gc_collect", "gc_collect_impl", "PyGC_Collect", "_PyGC_Collect",
	"_PyGC_CollectNoFail", "_PyGC_CollectIfEnabled", "_Py_RunGC", "gc_collect_full", "gc_collect_young",
	"gc_collect_increment", "gc_collect_region",
};

int interp_is_gc(const char *name)
{
	if (!name)
		return 0;
	size_t n = strcspn(name, ".@");
	if (name[n] == '@')
		return 0;
	for (size_t i = 0; i < sizeof(gc_entry) / sizeof(gc_entry[0]); i++)
		if (!strncmp(name, gc_entry[i], n) && gc_entry[i][n] == 0)
			return 1;
	return 0;
}
