"""The shared conformance battery (umview.testing) for each redirecting module."""
from umview.testing import RedirectConformance


class TestUnreal(RedirectConformance):
    def view(self, real, tmp):
        return ["-p", "unreal"], "/unreal" + str(real)


class TestUnrealNested(RedirectConformance):
    def view(self, real, tmp):
        return ["-p", "unreal"], "/unreal/unreal" + str(real)


class TestViewfsMove(RedirectConformance):
    def view(self, real, tmp):
        target = tmp / "mnt" / "point"
        target.mkdir(parents=True)
        return ["-p", f"viewfs,mount={real}:{target}"], str(target)
