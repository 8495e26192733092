/*
 * The I/O model of DTrace's D library: fileinfo_t over the Linux struct file, and the paths
 * of the current process's working and root directories (cwd, root).
 *
 * fi_pathname is d_path() of the file's f_path (the path as Linux prints it, " (deleted)" and
 * all), fi_dirname its dirname(). fi_mount is "<unknown>", as DTrace on Linux defines it. The O_*
 * values are those of x86-64 (and arm64 but for O_DIRECT, O_LARGEFILE, O_DIRECTORY, O_NOFOLLOW).
 */

typedef struct fileinfo {
	string fi_name;			/* name (last component of the path) */
	string fi_dirname;		/* directory of fi_pathname */
	string fi_pathname;		/* full path */
	loff_t fi_offset;		/* offset within the file */
	string fi_fs;			/* file system type */
	string fi_mount;		/* mount point: "<unknown>" */
	int fi_oflags;			/* open(2) flags */
} fileinfo_t;

inline int O_ACCMODE = 0x0003;
inline int O_RDONLY = 0x0000;
inline int O_WRONLY = 0x0001;
inline int O_RDWR = 0x0002;
inline int O_CREAT = 0x0040;
inline int O_EXCL = 0x0080;
inline int O_NOCTTY = 0x0100;
inline int O_TRUNC = 0x0200;
inline int O_APPEND = 0x0400;
inline int O_NONBLOCK = 0x0800;
inline int O_NDELAY = 0x0800;
inline int O_DSYNC = 0x1000;
inline int O_ASYNC = 0x2000;
inline int O_DIRECT = 0x4000;
inline int O_LARGEFILE = 0x8000;
inline int O_DIRECTORY = 0x10000;
inline int O_NOFOLLOW = 0x20000;
inline int O_NOATIME = 0x40000;
inline int O_CLOEXEC = 0x80000;
inline int O_SYNC = 0x101000;
inline int O_FSYNC = 0x101000;
inline int O_RSYNC = 0x101000;

translator fileinfo_t < struct file *F > {
	fi_name = F == 0 ? "<none>" : stringof(F->f_path.dentry->d_name.name);
	fi_dirname = F == 0 ? "<none>" : dirname(d_path(&F->f_path));
	fi_pathname = F == 0 ? "<none>" : d_path(&F->f_path);
	fi_offset = F == 0 ? 0 : F->f_pos;
	fi_fs = F == 0 ? "<none>" : stringof(F->f_path.mnt->mnt_sb->s_type->name);
	fi_mount = F == 0 ? "<none>" : "<unknown>";
	fi_oflags = F == 0 ? 0 : F->f_flags;
};

/*
 * __getf[fd]: the current process's struct file of file descriptor fd, NULL when fd is not
 * open (what getf(fd) gives: the compiler expands a call of getf() to it).
 */
inline struct file *__getf[int fd] =
    fd >= 0 && fd < curthread->files->fdt->max_fds ?
    curthread->files->fdt->fd[fd] : (struct file *)0;

/* fds[fd]: the fileinfo_t of the current process's file descriptor fd ("<none>" when not open) */
inline fileinfo_t fds[int fd] = xlate <fileinfo_t> (__getf[fd]);

/* the current process's working directory and root directory */
inline string cwd = d_path(&curthread->fs->pwd);
inline string root = d_path(&curthread->fs->root);
