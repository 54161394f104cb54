"""Views: a set of processes and the engine stack their calls walk.

A monitor starts with one view, the *root* (view id 0): every process it
traces is in it, unless it is in a nested view. ``umview`` run inside a view
does not trace its command a second time (ptrace allows one tracer, and the
monitor is it): it asks the monitor, through the control channel, for a
*nested view* (umview.servicecontrol, NEST). The monitor loads the requested
modules as the engines of a new view whose processes are the requesting
process and its future descendants, and the requester then execs the command.

The stack of a view is its parent's stack with its own engines on top: a call
of one of its processes enters its own engines first (newest first, ranks
then epochs as in one view), then its parent's, and so on down to the root's;
exits the reverse. A process of an outer view never walks an inner view's
engines. An engine marked ``per_view`` (the control engine, the cwd tracker)
is one per stack: a view's own replaces its parent's, so the control channel
answers for the view the caller is in, and one cwd tracker follows every
mount of the stack.

Membership is per thread and inherited at fork and clone (the monitor's fork
event; the C core holds a new child until its parent's event is handled, so
the child's first call already knows its view). When the last process of a
nested view is gone, and no view nested in it is left, the view closes: its
engines leave, its modules close.
"""


class View:
    """One view: its id, its parent (None for the root), its own engines,
    its threads (a nested view's; the root's are all the others)."""

    def __init__(self, view_id, parent=None, monitor=None):
        self.id = view_id
        self.parent = parent
        self.monitor = monitor
        #: its own engines, oldest first (ranks first, then epochs: Dispatcher.add)
        self.own = []
        #: threads of this view (nested views only)
        self.tids = set()
        #: views nested in this one that are still open
        self.children = []
        #: the process that asked for it (nested views: ServiceControl.nest)
        self.first = None
        #: the ServiceControl engine answering its control calls
        self.control = None
        self._running = False
        self._stack = None
        self._entry = None
        self._hooks = {}
        #: the variants its stack refuses (Dispatcher.refused), once known
        self.refused = None

    def __repr__(self):
        return f"<View {self.id} of {len(self.tids)} threads, {len(self.own)} engines>"

    def all_tids(self):
        """Its threads and those of the views nested in it (nested views)."""
        out = set(self.tids)
        for c in self.children:
            out |= c.all_tids()
        return out

    # --- the engine stack ---
    @property
    def engines(self):
        """The engines a call of this view's processes may walk, oldest first."""
        if self._stack is None:
            base = self.parent.engines if self.parent is not None else []
            mine = {e.per_view for e in self.own if e.per_view}
            self._stack = [e for e in base if not e.per_view or e.per_view not in mine] + self.own
        return self._stack

    def entry_order(self):
        """The stack newest first (the order a call enters it)."""
        if self._entry is None:
            self._entry = self.engines[::-1]
        return self._entry

    def hooks(self, name):
        """The engines of the stack that override the process event ``name``."""
        hooks = self._hooks.get(name)
        if hooks is None:
            from umview.engine import Engine

            base = getattr(Engine, name)
            hooks = self._hooks[name] = [e for e in self.engines if getattr(type(e), name) is not base]
        return hooks

    def changed(self):
        """Its stack changed (or its parent's): forget what was derived from it."""
        self._stack = self._entry = self.refused = None
        self._hooks = {}
        for child in self.children:
            child.changed()

    def outer(self):
        """Its enclosing views, innermost first."""
        v, out = self.parent, []
        while v is not None:
            out.append(v)
            v = v.parent
        return out

    # --- what modules use (Module.view) ---
    def add_engine(self, engine):
        """Register an engine in this view while it runs (a mount)."""
        self.monitor.add_engine(engine, self)

    def remove_engine(self, engine):
        self.monitor.remove_engine(engine)

    @property
    def running(self):
        """Has this view's command started? (The root's: its first process;
        a nested view's: once the requester is back from NEST.)"""
        if self.parent is None:
            return self.monitor is not None and self.monitor.running
        return self._running

    @running.setter
    def running(self, value):
        self._running = bool(value)
